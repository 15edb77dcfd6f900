"""`stoker bench cache` holds whole sessions to the ideal: the figures docs/benchmarks.md quotes
are checked here on every run (the workloads take about a second on the simulator)."""

from __future__ import annotations

from pathlib import Path

from stoker.bench.cache import extended, hard


async def test_hard_workload_is_within_a_few_percent_of_the_ideal(tmp_path: Path) -> None:
    figures = await hard(tmp_path)
    total = figures.total
    assert total.cost_ratio <= 0.150
    assert total.written <= 1.02 * total.ideal
    assert total.undeclared == 0
    gap = next(p for p in figures.phases if p.name == "6-minute gap")
    after = next(p for p in figures.phases if p.name == "after the gap")
    assert gap.keep_warm_calls == 1
    assert after.read_share > 0.99  # the return reads what the seal kept


async def test_extended_workload_has_no_undeclared_miss_and_a_cheap_long_gap(
    tmp_path: Path,
) -> None:
    figures = await extended(tmp_path)
    assert figures.total.undeclared == 0
    assert [m.split(": ", 1)[1].split(":")[0] for m in figures.total.misses] == [
        "declared",
        "declared",
    ]  # only the two `/model` switches, both declared
    gap = next(p for p in figures.phases if p.name == "3-hour gap")
    assert gap.keep_warm_calls == 3
    assert gap.keep_warm_units < gap.rewrite_units
    after = next(p for p in figures.phases if p.name == "after 3 hours")
    assert after.read_share > 0.99
