"""`stoker bench frameworks`: each framework's own agent costs the same in process as
through the proxy, and writes what an ideal run writes."""

from __future__ import annotations

import pytest

from stoker.bench.frameworks import FRAMEWORKS, run_frameworks_bench


@pytest.mark.slow  # five frameworks, each three ways
def test_every_framework_costs_the_same_in_process_as_through_the_proxy() -> None:
    figures = run_frameworks_bench()
    assert [f.name for f in figures] == list(FRAMEWORKS)
    for f in figures:
        assert f.in_process.calls >= 4, f.name  # a turn a question, tool calls besides
        # one implementation behind both: within 1% (here: the same)
        assert f.in_process.cost == pytest.approx(f.proxy.cost, rel=0.01), f.name
        assert f.in_process.cost < 0.5, f.name  # the long system prompt was read
        if f.free_writes:
            assert f.writes(f.in_process) is None
            continue
        ratio = f.writes(f.in_process)
        assert ratio is not None
        assert ratio <= 1.02, f.name
        # the 6-minute gap was crossed by keep-warm from the framework's own process
        assert f.in_process.pings >= 1, f.name
        assert f.proxy.pings == f.in_process.pings, f.name
