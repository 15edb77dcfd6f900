"""`stoker bench proxy`: the figures hold what the issue asks of optimize mode."""

from __future__ import annotations

import asyncio

from stoker.bench.proxy import run_proxy_bench


def test_optimize_brings_a_caching_off_workload_within_10_percent_of_stoker() -> None:
    figures = asyncio.run(run_proxy_bench(rounds=1))
    assert figures.calls == 32
    assert 0.99 <= figures.direct_cost <= 1.01  # no breakpoints: nothing is ever read
    assert figures.optimized_cost <= 1.10 * figures.stoker_cost
    assert figures.pings >= 1  # the 6-minute gap was crossed by keep-warm
    # The latency half ran both modes through real `stoker proxy` processes (no timing
    # is asserted here: the figures are the benchmark's, on a quiet machine).
    assert figures.audit is not None
    assert figures.optimize is not None
