"""The time policy that learns when people come back (`stoker.cache.learned`, decided in
`time_policy.decide`): rent-or-buy within twice foresight while history is thin, the
expected-cost choice once it is not, and history read from the store's other sessions."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.agent.agent import Agent
from stoker.bench.returns import MIXTURES, run_fuzz, run_mixtures, time_policy
from stoker.bench.workload import SYSTEM, TOOLS, WorkloadModel
from stoker.cache.foresight import Gap, optimum, replay, rewrite, tariff
from stoker.cache.learned import MIN_SEEN, ReturnTimes
from stoker.cache.models import model_info
from stoker.cache.time_policy import Idle, TimePolicy, decide
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore

DAYS = 20
KEPT_WARM = ["claude-sonnet-4-6", "claude-opus-4-6", "anthropic.claude-sonnet-4-6"]
"""Models Stoker sends keep-warm requests to (whose requests choose their TTLs)."""


@st.composite
def gaps(draw: st.DrawFn, model: str) -> Gap:
    """A gap the user comes back from, its tail (the last answer) a small part of the
    prefix, as an answer is against tools, system prompt and history, and not empty (a
    seal needs a position of its own: Stoker does not turn a short entry into a long one
    by reading it under a long marker, which foresight, on the accountant's rules, may)."""
    info = model_info(model)
    cached = draw(st.integers(min_value=info.min_cacheable, max_value=200_000))
    return Gap(
        seconds=draw(st.floats(min_value=1.0, max_value=30 * 3600.0)),
        cached=cached,
        tail=draw(st.integers(min_value=1, max_value=cached // 10)),
        long_lived=draw(st.booleans()),
    )


@settings(max_examples=80, deadline=None)
@given(data=st.data(), model=st.sampled_from(KEPT_WARM))
def test_with_no_history_a_gap_costs_at_most_twice_foresight(
    data: st.DataObject, model: str
) -> None:
    """Rent-or-buy's bound: twice what foresight pays, plus the share of the tail a
    keep-warm wrote before the entry was let go (it is rewritten with the rest)."""
    gap = data.draw(gaps(model))
    info = model_info(model)
    t = tariff(info)
    paid = replay(gap, t, time_policy(info, TimePolicy())).cost
    best = optimum(gap, t).cost
    assert paid <= (2.0 + gap.tail / gap.cached) * best + 1e-6, (paid, best)


def test_a_user_who_comes_back_after_forty_minutes_is_sealed_for_at_once() -> None:
    """Seen often enough, a pattern is crossed as foresight crosses it."""
    info = model_info("claude-sonnet-4-6")
    t = tariff(info)
    seen = [40 * 60.0] * MIN_SEEN
    gap = Gap(seconds=41 * 60.0, cached=30_000, tail=200)
    paid = replay(gap, t, time_policy(info, TimePolicy(), gaps=seen))
    assert paid == optimum(gap, t)
    assert paid.moves == ("seal",)


def test_a_user_who_comes_back_the_next_day_is_let_go_at_once() -> None:
    """Once the session's robustness account can pay for a return just after the
    expiry; before, the learned expiry waits until rent-or-buy would let go."""
    info = model_info("claude-sonnet-4-6")
    t = tariff(info)
    seen = [18 * 3600.0] * 20  # enough that the prior (worth one gap) no longer counts
    gap = Gap(seconds=17 * 3600.0, cached=30_000, tail=200)
    thin = replay(gap, t, time_policy(info, TimePolicy()))
    slack = 2 * rewrite(gap, t)  # what earlier gaps crossed at foresight's cost left
    learned = replay(gap, t, time_policy(info, TimePolicy(), gaps=seen, slack=slack))
    guarded = replay(gap, t, time_policy(info, TimePolicy(), gaps=seen))
    assert learned == optimum(gap, t)
    assert learned.moves == ("expire",)
    assert thin.cost > learned.cost  # rent-or-buy paid keep-warm first
    assert learned.cost < guarded.cost <= thin.cost


def test_a_keep_warm_the_cap_would_cut_short_is_not_planned() -> None:
    """Seen back only the next morning, a user away an hour is let go within a few: the
    search no longer counts on reading the long entry until the morning, which the cap
    (one rewrite) stops after ten hours; it then paid those reads and the rewrite too,
    twice foresight."""
    info = model_info("claude-sonnet-4-6")
    t = tariff(info)
    seen = [60.0] * 20 + [13 * 3600.0, 15 * 3600.0, 16 * 3600.0]
    gap = Gap(seconds=17 * 3600.0, cached=30_000, tail=200)
    slack = 2 * rewrite(gap, t)  # a session whose earlier gaps left room for the risk
    paid = replay(gap, t, time_policy(info, TimePolicy(), gaps=seen, slack=slack))
    assert paid.moves == ("seal", "ping", "ping", "ping", "ping", "expire")
    assert paid.cost < 1.5 * optimum(gap, t).cost


def test_at_the_cap_the_reason_says_so() -> None:
    idle = Idle(
        refreshed_at=0.0,
        live_for=3600.0,
        idle_since=-300.0,
        cached=30_000,
        tail=0,
        long_lived=True,
        spent=32_000.0,
    )
    plan = decide(idle, model_info("claude-sonnet-4-6"), TimePolicy(), gaps=[7200.0] * 10)
    assert plan.action == "expire"
    assert plan.reason == (
        "this gap spent 32,000: any more keep-warm would pass the rewrite it saves "
        "(its cap: one rewrite), so it expires"
    )


def test_the_estimate_weighs_only_the_gaps_longer_than_this_one() -> None:
    est = ReturnTimes.of([60.0, 600.0, 700.0, 20 * 3600.0, math.inf], horizon=86400.0)
    assert est.longer(300.0) == 4
    assert est.back(300.0, 900.0) > est.back(300.0, 400.0)
    assert est.back(3600.0, 7200.0) < 0.5  # only the next-day one and a never-back remain


def test_learned_estimates_stay_near_foresight_and_the_fuzz_within_twice() -> None:
    """The bench's figures, small: every mixture within 6% of foresight over the whole
    session, and no fuzzed sequence past twice foresight over its gaps."""
    rows = run_mixtures()
    assert [r.name for r in rows] == list(MIXTURES)
    for row in rows:
        assert 1.0 <= row.ratio <= 1.06, row
    assert run_fuzz(40).gap_ratio <= 2.0


async def test_a_new_session_learns_from_the_stores_other_sessions(tmp_path: Path) -> None:
    """Gaps another session showed are in the store; a new session opened on it plans
    its first gap by them, not by rent-or-buy: letting go at once is the move they
    favour, and with none of its own gaps to pay for the risk of a return just after
    it (`stoker.cache.robust`), it keeps the entry as long as twice foresight allows."""
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(model=WorkloadModel()), clock=clock)
    agent = Agent(
        "claude-sonnet-4-6",
        provider=provider,
        tools=TOOLS,
        system=SYSTEM,
        clock=clock,
        keep_warm=False,
    )
    async with SQLiteStore(tmp_path / "s.db") as store:
        fresh = await agent.open(store, "fresh")
        await fresh.send("Hello")
        thin = fresh.warm_plan()
        assert thin is not None
        assert "rent-or-buy" in thin.reason
        earlier = await agent.open(store, "earlier")
        for n in range(DAYS):
            clock.advance(minutes=18 * 60)
            await earlier.send(f"Good morning, day {n}")
        newcomer = await agent.open(store, "newcomer")
        await newcomer.send("Hello")
        plan = newcomer.warm_plan()
    assert plan is not None
    assert plan.action == "seal"
    assert "expire was cheaper in expectation" in plan.reason
    assert "from 19 gaps seen" in plan.reason
    assert f"from {DAYS - 1} gaps seen" in plan.reason
