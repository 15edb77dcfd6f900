"""The offline optimum of keep-warm (`stoker.cache.foresight`): never above what any
online policy pays on the same gaps, and equal to an exhaustive search where one fits."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.bench.returns import time_policy
from stoker.cache.foresight import (
    Crossing,
    Gap,
    Move,
    Point,
    Tariff,
    moves_at,
    optimum,
    replay,
    rewrite,
    start,
    step,
    tariff,
)
from stoker.cache.models import model_info
from stoker.cache.time_policy import TimePolicy

SONNET = model_info("claude-sonnet-4-6")
MENUS = {
    "anthropic": tariff(SONNET),
    "openai-5.6": tariff(model_info("gpt-5.6")),
    "gemini": tariff(model_info("gemini-2.5-flash")),
    "bedrock": tariff(model_info("anthropic.claude-sonnet-4-6")),
}
BOUNDED = settings(max_examples=60, deadline=None)

gaps = st.builds(
    Gap,
    seconds=st.floats(min_value=1.0, max_value=30 * 3600.0),
    cached=st.integers(min_value=0, max_value=200_000),
    tail=st.integers(min_value=0, max_value=5_000),
    long_lived=st.booleans(),
    held=st.one_of(st.none(), st.floats(min_value=0.0, max_value=7200.0)),
)
short_gaps = st.builds(
    Gap,
    seconds=st.floats(min_value=1.0, max_value=25 * 60.0),
    cached=st.integers(min_value=0, max_value=50_000),
    tail=st.integers(min_value=0, max_value=5_000),
    long_lived=st.booleans(),
)
menus = st.sampled_from(sorted(MENUS))


def exhaustive(gap: Gap, t: Tariff) -> float:
    """Every schedule of moves, no pruning: the least any of them costs."""

    def go(point: Point) -> float:
        if gap.seconds <= point.expires:
            saved = (t.write_short - t.read) * gap.tail if point.tail_written else 0.0
            return point.spent - saved
        costs = []
        held = gap.cached + gap.tail
        for move in moves_at(gap, t, point):
            if move == "expire":
                costs.append(point.spent + (t.write_short - t.read) * gap.cached)
            elif move == "store":
                storage = (t.storage or 0.0) * held * (gap.seconds - point.at) / 3600.0
                saved = (t.write_short - t.read) * gap.tail
                costs.append(point.spent + t.create * held + storage - saved)
            else:
                costs.append(go(step(move, gap, t, point)))
        return min(costs)

    first = start(gap, t)
    if gap.seconds <= first.expires:
        return 0.0
    return go(first)


def scripted(moves: list[Move]) -> object:
    """A policy that plays `moves` in order, then lets the entry expire."""
    queue = list(moves)

    def choose(_gap: Gap, _point: Point) -> Move:
        return queue.pop(0) if queue else "expire"

    return choose


@BOUNDED
@given(gap=short_gaps, menu=menus)
def test_optimum_equals_an_exhaustive_search_on_short_gaps(gap: Gap, menu: str) -> None:
    t = MENUS[menu]
    assert math.isclose(optimum(gap, t).cost, exhaustive(gap, t), rel_tol=1e-9, abs_tol=1e-6)


@BOUNDED
@given(
    gap=gaps,
    menu=menus,
    moves=st.lists(st.sampled_from(["ping", "seal", "expire", "store"]), max_size=40),
)
def test_optimum_is_never_above_a_policy(gap: Gap, menu: str, moves: list[Move]) -> None:
    """Random schedules, the simple ones (always ping, always seal, never) and Stoker's
    time policy with and without seen gaps: each pays at least the optimum."""
    t = MENUS[menu]
    best = optimum(gap, t).cost
    info = (
        SONNET if menu == "anthropic" else model_info("gpt-5.6") if menu == "openai-5.6" else None
    )
    policies = [
        scripted(moves),
        lambda _g, _p: "ping",
        lambda _g, _p: "seal",
        lambda _g, _p: "expire",
    ]
    if info is not None:
        policies.append(time_policy(info, TimePolicy()))
        policies.append(time_policy(info, TimePolicy(), gaps=[gap.seconds, 40.0, 86_400.0]))
    for choose in policies:
        paid = replay(gap, t, choose, limit=2_000)  # type: ignore[arg-type]
        assert best <= paid.cost + 1e-6, (choose, paid, best)


def test_a_six_minute_gap_is_best_crossed_by_one_ping() -> None:
    t = MENUS["anthropic"]
    gap = Gap(seconds=360.0, cached=20_000, tail=300)
    best = optimum(gap, t)
    expected = t.read * 20_000 + t.write_short * 300 + 16 - (t.write_short - t.read) * 300
    assert best == Crossing(moves=("ping",), cost=expected, kept=True)


def test_a_next_day_return_is_best_let_expire() -> None:
    t = MENUS["anthropic"]
    gap = Gap(seconds=20 * 3600.0, cached=20_000, tail=300)
    assert optimum(gap, t) == Crossing(moves=("expire",), cost=rewrite(gap, t), kept=False)


def test_a_forty_minute_gap_is_best_sealed() -> None:
    t = MENUS["anthropic"]
    best = optimum(Gap(seconds=40 * 60.0, cached=20_000, tail=300), t)
    assert best.moves == ("seal",)
    assert best.kept


def test_nobody_coming_back_costs_foresight_nothing() -> None:
    t = MENUS["anthropic"]
    gap = Gap(seconds=math.inf, cached=20_000, tail=300)
    assert optimum(gap, t).cost == 0.0
    assert replay(gap, t, lambda _g, _p: "ping", limit=50).cost > 0.0


def test_gemini_stores_an_explicit_cache_only_when_storage_beats_a_rewrite() -> None:
    t = MENUS["gemini"]
    assert t.storage is not None
    soon = optimum(Gap(seconds=400.0, cached=20_000, held=300.0), t)
    assert soon.moves == ("extend",)
    late = optimum(Gap(seconds=10 * 3600.0, cached=20_000, held=300.0), t)
    assert late.moves == ("expire",)


def test_openai_retention_keeps_a_gap_under_its_lifetime_free() -> None:
    t = tariff(model_info("gpt-5"))
    assert optimum(Gap(seconds=20 * 3600.0, cached=20_000), t).moves == ()
    assert MENUS["openai-5.6"].short == 1800.0
