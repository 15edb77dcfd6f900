"""`stoker bench proxy`: the figures hold what the issue asks of optimize mode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from stoker.bench.proxy import LATENCY_ROUTES, proxied_workload, run_proxy_bench
from stoker.proxy import proxy_report
from stoker.store.sqlite import SQLiteStore
from stoker.wire.exchange import Exchange


@pytest.mark.slow  # the workload three ways, through proxy processes
def test_optimize_brings_a_caching_off_workload_within_10_percent_of_stoker() -> None:
    figures = asyncio.run(run_proxy_bench(rounds=1))
    assert figures.calls == 32
    assert 0.99 <= figures.direct_cost <= 1.01  # no breakpoints: nothing is ever read
    assert figures.optimized_cost <= 1.10 * figures.stoker_cost
    assert figures.pings >= 1  # the 6-minute gap was crossed by keep-warm
    # The latency half ran both modes through real `stoker proxy` processes (no timing
    # is asserted here: the figures are the benchmark's, on a quiet machine).
    assert set(figures.added) == set(LATENCY_ROUTES)
    # The same traffic through stoker.http_client(optimize=True) in this process: the
    # proxy's cost within 1%, its writes at most 2% over the ideal, keep-warm across the
    # gap from the client's own thread (the latency half ran every route, in process too).
    assert figures.in_process_cost == pytest.approx(figures.optimized_cost, rel=0.01)
    assert figures.in_process_writes <= 1.02
    assert figures.in_process_pings >= 1


@pytest.mark.parametrize("optimize", [False, True], ids=["audit", "optimize"])
def test_report_proxy_agrees_with_the_providers_usage_call_by_call(
    tmp_path: Path, optimize: bool
) -> None:
    """On the bench's workload (a tool loop, a gap, a fork, a resume by a new client),
    each call's ideal writes are the provider's own count of what no earlier call sent
    (its input less that of the longest earlier call it extends), every lineage's writes
    are 1.00x that ideal through `--optimize`, and the misses the report lists are the
    calls whose reported read fell short of what was sent before, by the tokens it fell
    short."""
    sent, db = proxied_workload(tmp_path, optimize=optimize)
    assert len(sent) == 32
    expected: dict[tuple[int, int], tuple[int, int]] = {}  # (messages, input) -> (ideal, lost)
    for k, call in enumerate(sent):
        earlier = [s for s in sent[:k] if call.messages[: len(s.messages)] == s.messages]
        shared = max((s.usage.input_total for s in earlier), default=0)
        lost = max(0, shared - call.usage.read)
        key = (len(call.messages), call.usage.input_total)
        assert key not in expected
        expected[key] = (call.usage.input_total - shared, lost)
    exchanges, report = asyncio.run(_read(db))
    turns = [x for x in exchanges if x.purpose == "turn" and x.record is not None]
    assert len(turns) == 32
    got = {}
    for x in turns:
        assert x.record is not None
        got[(x.record.fingerprints.message_count, x.record.usage.input_total)] = x
    assert {k: x.ideal for k, x in got.items()} == {k: v[0] for k, v in expected.items()}
    missed = {
        (c.record.fingerprints.message_count, c.usage.input_total): m.lost_tokens
        for lineage in report.lineages
        for m in lineage.misses
        for c in lineage.calls
        if c.number == m.call
    }
    assert missed == {k: v[1] for k, v in expected.items() if v[1] > 0}
    if optimize:
        for figures in _figures(report):
            assert figures["writes_vs_ideal"] == 1.0, figures


def _figures(report: Any) -> list[dict[str, Any]]:
    return [f for lineage in report.lineages for f in lineage.extra["lineages"]]


async def _read(db: Path) -> tuple[list[Exchange], Any]:
    async with SQLiteStore(db) as store:
        exchanges = [
            x
            for lineage in await store.proxy_lineages()
            for x in await store.proxy_calls(lineage.id)
        ]
        return exchanges, await proxy_report(store)
