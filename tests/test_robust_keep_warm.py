"""The learned keep-warm held to twice foresight whatever its history says: a history
drawn from one distribution, the returns from another (or placed just after the entry
would expire), and the session's gaps still cost at most twice what foresight pays
(`stoker.cache.robust`). Long runs belong to `stoker bench cache --workload foresight
--fuzz N --seed S`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.agent.keepwarm import KeepWarm
from stoker.agent.session import Session
from stoker.bench.returns import KINDS, time_policy
from stoker.bench.workload import SYSTEM, TOOLS, WorkloadModel
from stoker.cache import robust
from stoker.cache.foresight import Gap, compare, tariff
from stoker.cache.hindsight import GapReview, hindsight, reviews
from stoker.cache.models import model_info
from stoker.cache.robust import Account, carried, settle, settled
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.wire.record import CacheRecord
from tests.helpers import sim_agent

KEPT_WARM = ["claude-sonnet-4-6", "claude-opus-4-6", "anthropic.claude-sonnet-4-6"]
DAY = 30 * 3600.0


@st.composite
def returns(draw: st.DrawFn, *, least: int = 0, most: int) -> list[float]:
    """Gaps (seconds) from one distribution: a mixture of the bench's kinds, log-uniform
    from a second to 30 hours, one length repeated, or just after an expiry along the
    entry's cheapest cover (pings every 270 s, or a seal and a read every hour)."""
    n = draw(st.integers(min_value=least, max_value=most))
    style = draw(st.sampled_from(["kinds", "uniform", "repeated", "just-after"]))
    if style == "kinds":
        kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=4))
        return [
            math.exp(draw(st.floats(math.log(KINDS[k][0]), math.log(KINDS[k][1]))))
            for k in draw(st.lists(st.sampled_from(kinds), min_size=n, max_size=n))
        ]
    log_gap = st.floats(min_value=0.0, max_value=math.log(DAY))
    if style == "uniform":
        return [math.exp(g) for g in draw(st.lists(log_gap, min_size=n, max_size=n))]
    if style == "repeated":
        return [math.exp(draw(log_gap))] * n
    after = st.builds(
        lambda pings, reads, late, sealed: (
            (270.0 + 3600.0 + 3570.0 * reads if sealed else 300.0 + 270.0 * pings) + late
        ),
        st.integers(min_value=0, max_value=12),
        st.integers(min_value=0, max_value=20),
        st.floats(min_value=0.001, max_value=60.0),
        st.booleans(),
    )
    return draw(st.lists(after, min_size=n, max_size=n))


@settings(max_examples=100, deadline=None)
@given(
    model=st.sampled_from(KEPT_WARM),
    history=returns(most=40),
    sequence=returns(least=1, most=20),
    prefix=st.integers(min_value=4_096, max_value=120_000),  # cacheable on each model
    growth=st.integers(min_value=0, max_value=2_000),
    tail=st.integers(min_value=1, max_value=2_000),
)
def test_whatever_the_history_a_session_costs_at_most_twice_foresight(
    model: str,
    history: list[float],
    sequence: list[float],
    prefix: int,
    growth: int,
    tail: int,
) -> None:
    info = model_info(model)
    t = tariff(info)
    seen = list(history)
    slack = paid = best = tails = 0.0
    for i, seconds in enumerate(sequence):
        gap = Gap(seconds=seconds, cached=prefix + i * growth, tail=min(tail, prefix // 10))
        crossed = compare([gap], t, time_policy(info, TimePolicy(), gaps=seen, slack=slack))
        paid += crossed.paid_cost
        best += crossed.best_cost
        # rent-or-buy's own term: once a keep-warm wrote the tail, the time policy sees it
        # cached and counts its rewrite as lost too (foresight: it is sent again anyway)
        tails += (t.write_short - t.read) * gap.tail
        slack = settle(slack, paid=crossed.paid_cost, best=crossed.best_cost)
        seen.append(seconds)
        assert slack >= -tails - 1e-6 * prefix, (i, paid, best)
    assert paid <= 2.0 * best + tails + 1e-6 * prefix, (paid, best)


async def _lived(minutes: Sequence[float]) -> Session:
    """A session on a frozen clock with the time policy's keep-warm: a first message, then
    one after each idle gap of `minutes`."""
    clock = FrozenClock()
    agent, _ = sim_agent(
        model=WorkloadModel(), clock=clock, tools=TOOLS, system=SYSTEM, keep_warm=False
    )
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("Hello")
    for n, gap in enumerate(minutes):
        await scheduler.idle(gap * 60)
        await session.send(f"Back after {gap} minutes ({n})")
    return session


async def test_a_session_settles_each_gap_into_its_account_as_its_report_reads_it() -> None:
    """The account a live session carries (what its keep-warm may risk) is its records'
    gaps as `stoker report` reads them, settled one gap at a time as the gaps end (and
    so is a proxy lineage's, which keeps only the records since its latest turn)."""
    session = await _lived([3, 40, 18 * 60, 2, 18 * 60, 25])
    info = model_info("claude-sonnet-4-6")
    seen = hindsight(session.records)
    assert seen is not None
    at_once = settled(Account(), session.records, info)
    assert at_once.slack == pytest.approx(sum(2 * g.best.cost - g.paid for g in seen.gaps))
    halves = settled(Account(), session.records[:5], info)
    assert settled(halves, session.records, info).slack == pytest.approx(at_once.slack)
    carrying: tuple[Account, tuple[CacheRecord, ...]] = (Account(), ())
    for record in session.records:  # as a proxy's lineage keeps it: the records since a turn
        carrying = carried(*carrying, record, info)
    assert carrying[0].slack == pytest.approx(at_once.slack)
    # told its user comes back the next morning, the session would let the entry go at
    # once; a return just after would cost more than its account can pay, so it is kept
    plan = session.warm_plan(gaps=[18 * 3600.0] * 200)
    assert plan is not None
    assert plan.action == "seal"
    assert f"past the session's slack of {at_once.slack:,.0f};" in plan.reason


async def test_settling_call_by_call_skips_untouched_gaps_and_agrees_with_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A live session settles its account after every call; a turn right after another
    (within the entry's lifetime, reading all it left) is not reviewed, and the account
    still comes out as `stoker report` reads the whole session."""
    session = await _lived([1, 2, 40, 0.5, 18 * 60, 3, 4, 25, 1])
    info = model_info("claude-sonnet-4-6")
    reviewed: list[int] = []

    def counted(window: Sequence[CacheRecord], *rest: Any) -> list[GapReview]:
        reviewed.append(len(window))
        return reviews(window, *rest)

    monkeypatch.setattr(robust, "reviews", counted)  # the module settled() looks it up in
    account = Account()
    for end in range(1, len(session.records) + 1):
        account = settled(account, session.records[:end], info)
    seen = hindsight(session.records)
    assert seen is not None
    assert account.slack == pytest.approx(sum(2 * g.best.cost - g.paid for g in seen.gaps))
    turns = sum(r.purpose == "turn" for r in session.records)
    assert 0 < len(reviewed) < turns - 1  # some gaps were reviewed, the untouched not
