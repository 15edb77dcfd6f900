"""`stoker bench gateway --http`, tiny: a real `stoker serve` child over loopback HTTP."""

from __future__ import annotations

import os

import pytest
from rich.console import Console

from stoker.bench.gateway_http import ENDPOINTS, paired_table, run_paired


@pytest.mark.slow  # a `stoker serve` child process
def test_the_http_bench_measures_the_server_and_loses_nothing() -> None:
    runs = run_paired(
        clients=5, sessions=5, messages=20, rounds=1, against=None, postgres=None, env=os.environ
    )
    (run,) = runs.this
    assert [r.endpoint for r in run] == list(ENDPOINTS)
    for r in run:
        assert (r.sent, r.failed, r.lost, r.duplicated, r.reordered) == (20, 0, 0, 0, 0)
        assert r.cpu_seconds > 0
        assert r.throughput > 0
        assert len(r.latency_ms) == 20
    assert runs.clean
    console = Console(width=140, record=True)
    console.print(paired_table(runs, title="tiny"))
    text = console.export_text()
    for figure in ("server CPU ms per message", "messages/s", "latency p99 (ms)"):
        assert figure in text
    assert "0 / 0 / 0 / 0" in text
