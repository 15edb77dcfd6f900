"""The PNG chart as drawn: whole-number call ticks, every stack (and its miss mark) under
the top of the plot, and a legend that names only what is on it."""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.axes import Axes

from stoker.cache.prices import PriceBook
from stoker.clock import FrozenClock
from stoker.report import build_report
from stoker.report.build import Report
from stoker.report.png import chart
from stoker.store.sqlite import SQLiteStore
from tests.test_report import PROMPTS, _agent


async def _two_turns(db: Path, *, gap_minutes: float) -> Report:
    """Two tool-using turns `gap_minutes` apart (past 5, the second turn's first call
    misses: its entries expired), reported."""
    clock = FrozenClock()
    async with SQLiteStore(db) as store:
        session = await _agent(clock).open(store, "g")
        await session.send(PROMPTS[0])
        clock.advance(minutes=gap_minutes)
        await session.send(PROMPTS[1])
        return await build_report(store, "g", prices=PriceBook())


def _drawn(report: Report) -> tuple[Axes, Axes]:
    fig = chart(report)
    fig.savefig(io.BytesIO(), format="png")  # lays out and places the ticks as written
    tokens, money = fig.axes[:2]
    return tokens, money


def _legend(axes: Axes) -> list[str]:
    legend = axes.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


async def test_ticks_count_whole_calls_and_the_tallest_stack_fits(tmp_path: Path) -> None:
    report = await _two_turns(tmp_path / "g.db", gap_minutes=10)
    assert [c.number for c in report.calls if c.is_miss]
    tokens, money = _drawn(report)
    for axes in (tokens, money):
        low, high = axes.get_xlim()
        ticks = [t for t in axes.get_xticks() if low <= t <= high]
        assert ticks
        assert [t for t in ticks if not float(t).is_integer()] == []
    tallest = max(c.usage.input_total for c in report.calls)
    assert tokens.get_ylim()[1] >= tallest * 1.1  # the stack and the miss mark over it
    assert "miss" in _legend(tokens)


async def test_a_report_without_misses_has_no_miss_in_its_legend(tmp_path: Path) -> None:
    report = await _two_turns(tmp_path / "h.db", gap_minutes=1)
    assert not [c for c in report.calls if c.is_miss]
    tokens, _ = _drawn(report)
    assert _legend(tokens) == ["read from cache", "written 5m", "written 1h", "uncached"]
