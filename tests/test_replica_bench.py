"""`stoker bench gateway --replicas`, small: real replicas, a replica killed and the
database restarted mid-run, and nothing lost, duplicated or reordered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from stoker.bench.replicas import replica_table, run_replica_bench
from stoker.gateway.replicas import launcher
from tests.store_fixtures import require_server_binaries

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # replicas and a database of its own, restarted
def test_the_replica_bench_loses_nothing_through_its_faults() -> None:
    require_server_binaries()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the replicas run this checkout's code
    launch = launcher(env, wait_seconds=1, pool_size=4)
    clean, faulty = run_replica_bench(launch, (2,), env=env, sessions=6, messages=12)
    for run in (clean, faulty):
        assert (run.sent, run.lost, run.duplicated, run.reordered, run.failed) == (72, 0, 0, 0, 0)
        assert run.switches > 0
        assert run.switches_full_read == run.switches  # a switch reads the whole prefix
    assert (clean.faults, faulty.faults) == (False, True)
    assert faulty.transport_errors > 0  # the killed replica cut connections; retried
    console = Console(width=160, record=True)
    console.print(replica_table([clean, faulty]))
    assert "lost/dup/reord" in console.export_text()
