"""`stoker report`'s "with perfect foresight: $X; paid: $Y" and the gaps where the two
differ, on sessions run on the simulator and stored as a user's would be."""

from __future__ import annotations

from pathlib import Path

from stoker.bench.cache import hard
from stoker.cache.prices import PriceBook
from stoker.clock import FrozenClock
from stoker.report import build_report
from stoker.store.sqlite import SQLiteStore
from tests.helpers import make_registry, sim_agent


async def test_the_report_says_what_foresight_would_have_paid(tmp_path: Path) -> None:
    """The hard workload's 6-minute gap was sealed (rent-or-buy: no history yet);
    foresight, knowing the user was back in 6 minutes, pings: the report says both, and
    what the seal expected."""
    await hard(tmp_path)
    async with SQLiteStore(tmp_path / "bench.db") as store:
        report = await build_report(store, "hard", prices=PriceBook())
    (lineage,) = report.lineages
    head, *gaps = lineage.notes
    assert head.startswith("with perfect foresight: $")
    assert "; paid: $" in head
    (gap,) = gaps
    assert gap.startswith("gap before call ")
    assert "(6 min idle): seal, the return read the entry" in gap
    assert "foresight: ping" in gap
    assert "it expected: seal:" in gap
    assert "rent-or-buy" in gap
    data = lineage.to_dict()["foresight"]
    assert data["foresight_usd"] < data["paid_usd"]
    (row,) = data["gaps"]
    assert (row["done"], row["foresight"], row["seconds"]) == (["seal"], "ping", 360.0)
    assert row["foresight_usd"] < row["paid_usd"]


async def test_a_gap_nobody_kept_warm_is_set_against_the_ping_that_would_have_done(
    tmp_path: Path,
) -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(registry=make_registry(), clock=clock)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "alone")  # no keep-warm scheduler watches it
        await session.send("read_file 'plan.md'")
        clock.advance(minutes=6)
        await session.send("and now?")
        report = await build_report(store, "alone", prices=PriceBook())
    head, gap = report.lineages[0].notes
    assert "1 idle gap, 1 crossed otherwise" in head
    assert "nothing sent, the entry expired" in gap
    assert "foresight: ping" in gap
    assert "none was sent" in gap  # what the time policy had planned, and that it did not go
