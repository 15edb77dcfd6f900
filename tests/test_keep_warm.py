"""Idle gaps on a frozen clock: when keep-warm requests fire, what they cost (exactly what
the simulator's accountant says), what the return reads, and what never happens (a
keep-warm after a new message, after `forget`, or one that hurts the session)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import replace
from typing import Any

import pytest

from stoker.agent.agent import Agent
from stoker.agent.keepwarm import KeepWarm, SpendLimits
from stoker.agent.session import Session
from stoker.cache.accounting import OpenAIAccountant, OpenAISettings
from stoker.cache.models import ModelInfo, model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.pricing import cost_usd
from stoker.cache.time_policy import Idle, TimePolicy, decide, return_chance
from stoker.clock import FrozenClock
from stoker.errors import ProviderError
from stoker.providers.base import CallContext, Completion
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.request import Request
from tests.helpers import SYSTEM, make_registry, sim_agent

START = FrozenClock().at
SONNET = model_info("claude-sonnet-4-6")


async def _watched() -> tuple[Session, KeepWarm, SimProvider]:
    """A session after one tool-using turn, watched by a scheduler on a frozen clock."""
    clock = FrozenClock()
    agent, provider = sim_agent(registry=make_registry(), clock=clock)
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("read_file 'plan.md'")
    return session, scheduler, provider


async def _idle_then_return(minutes: float) -> tuple[Session, SimProvider, list[Any], Any]:
    session, scheduler, provider = await _watched()
    fired = await scheduler.idle(minutes * 60)
    back = await session.send("and now?")
    return session, provider, fired, back


@pytest.mark.parametrize(
    ("minutes", "sealed_at"),
    [
        (4, []),  # back before the entry expires: nothing to do
        (6, [270]),  # sealed 30 s before the 5-minute entry expires
        (40, [270]),  # one seal covers the hour
        (180, [270, 270 + 3570, 270 + 2 * 3570]),  # re-sealed before each hour ends
    ],
)
async def test_seals_fire_on_time_and_the_return_reads_the_whole_prefix(
    minutes: float, sealed_at: list[float]
) -> None:
    session, provider, fired, back = await _idle_then_return(minutes)
    assert [(r.purpose, r.started_at - START) for r in fired] == [("seal", at) for at in sealed_at]
    first = back.records[0]
    before = session.records[len(session.records) - len(back.records) - 1]
    assert first.explanation.verdict == "hit"
    assert first.usage.read == before.usage.read + before.usage.written
    assert all(r.explanation.verdict == "kept_warm" for r in fired)
    if fired:  # the first seal writes the unwritten answer under a 1-hour entry
        assert fired[0].usage.written_1h > 0
        assert fired[0].usage.written_5m == 0
        assert fired[0].usage.output == 0
    # every figure is the accountant's own, and priced from it
    for record, outcome in zip(session.records, provider.outcomes, strict=True):
        assert replace(record.usage, output=0) == replace(outcome.usage, output=0)
        assert record.cost_usd == cost_usd(record.usage, SONNET)


async def test_without_keep_warm_the_same_gap_rewrites_everything() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(registry=make_registry(), clock=clock)
    agent = replace(
        agent, cache_policy=replace(agent.cache_policy, keep_warm=TimePolicy(enabled=False))
    )
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("read_file 'plan.md'")
    assert await scheduler.idle(6 * 60) == []
    back = await session.send("and now?")
    assert (back.records[0].usage.read, back.records[0].explanation.verdict) == (0, "expired")
    assert back.records[0].explanation.classification == "time policy"
    assert "let it expire: keep-warm is off" in back.records[0].explanation.detail


async def test_a_gap_nobody_kept_warm_says_the_seal_was_planned_but_not_sent() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(registry=make_registry(), clock=clock)
    session = agent.session()  # no KeepWarm scheduler watches it
    await session.send("read_file 'plan.md'")
    clock.advance(minutes=6)
    back = await session.send("and now?")
    first = back.records[0].explanation
    assert (first.verdict, first.classification) == ("expired", "keep-warm not run")
    assert "planned a seal but none was sent" in first.detail


async def test_a_keep_warm_never_enters_the_history_or_the_next_request() -> None:
    session, provider, fired, _ = await _idle_then_return(6)
    assert len(fired) == 1
    seal_payload = provider.requests[2]
    assert seal_payload["max_tokens"] == 0
    assert "keep-warm" in seal_payload["messages"][-1]["content"][0]["text"]
    texts = [b.get("text", "") for m in provider.requests[-1]["messages"] for b in m["content"]]
    assert not any("keep-warm" in t for t in texts)
    assert not any("keep-warm" in m.text for m in session.history if hasattr(m, "text"))


async def test_a_new_message_moves_the_keep_warm_and_forget_stops_it() -> None:
    session, scheduler, _ = await _watched()
    await scheduler.idle(200)
    await session.send("still here")  # the old due time (270 s) no longer applies
    assert await scheduler.idle(250) == []  # t = 450 s: 250 s after the new turn
    scheduler.forget(session.id)
    assert await scheduler.idle(3600) == []
    assert [r.purpose for r in session.records] == ["turn"] * len(session.records)


class FailingKeepWarm:
    """The sim, failing every keep-warm request (max_tokens 0)."""

    def __init__(self, inner: SimProvider) -> None:
        self.inner, self.name = inner, inner.name

    def model_info(self, model: str) -> ModelInfo:
        return self.inner.model_info(model)

    async def complete(self, request: Request, context: CallContext) -> Completion:
        if request.max_tokens == 0:
            raise ProviderError("overloaded", provider="sim", status=529)
        return await self.inner.complete(request, context)


async def test_a_failing_seal_leaves_the_session_intact() -> None:
    clock = FrozenClock()
    agent, provider = sim_agent(registry=make_registry(), clock=clock)
    agent = replace(agent, provider=FailingKeepWarm(provider))
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("read_file 'plan.md'")
    history = session.history
    assert await scheduler.idle(6 * 60) == []
    assert session.history == history
    plan = session.warm_plan()
    assert plan is not None
    assert not plan.sends
    back = await session.send("and now?")
    assert back.exit == "answered"
    assert back.records[0].explanation.verdict == "expired"


async def test_the_hourly_money_cap_holds_back_keep_warm() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(registry=make_registry(), clock=clock)
    scheduler = KeepWarm(clock, limits=SpendLimits(hourly_usd=0.0))
    session = agent.session()
    scheduler.watch(session)
    await session.send("read_file 'plan.md'")
    assert await scheduler.idle(6 * 60) == []


def _idle(**changes: Any) -> Idle:
    base = Idle(
        refreshed_at=0.0, live_for=300.0, idle_since=0.0, cached=40_000, tail=200, overhead=16
    )
    return replace(base, **changes)


def test_the_arithmetic_seals_when_a_return_is_likely_and_lets_go_when_not() -> None:
    plan = decide(_idle(), SONNET, TimePolicy())
    assert (plan.action, plan.ttl, plan.at) == ("seal", "1h", 270.0)
    assert plan.cost == pytest.approx(0.1 * 40_000 + 2.0 * 200 + 16)
    never_back = [math.inf] * 20  # twenty gaps that never ended
    # letting go at once is safe once the session's slack covers a return just after it
    assert decide(_idle(slack=50_000.0), SONNET, TimePolicy(), gaps=never_back).action == "expire"
    guarded = decide(_idle(), SONNET, TimePolicy(), gaps=never_back)
    assert guarded.action == "seal"
    assert guarded.reason.startswith("seal: keeps 40,000 tokens warm for 60 min; expire was ")
    spent = decide(_idle(spent=1.25 * 40_200 - 100), SONNET, TimePolicy())
    assert spent.action == "expire"
    assert "cap" in spent.reason
    assert decide(_idle(), SONNET, TimePolicy(enabled=False)).action == "expire"
    assert decide(_idle(cached=900), SONNET, TimePolicy()).action == "expire"
    # with nothing left unwritten a short entry cannot become a long one: ping instead
    assert decide(_idle(tail=0), SONNET, TimePolicy()).action == "ping"


def test_the_chance_of_a_return_follows_observed_gaps() -> None:
    kwargs: dict[str, float] = {"elapsed": 270, "within": 3600, "horizon": 86400, "weight": 1}
    assert return_chance([], **kwargs) == pytest.approx(3600 / 3870)
    assert return_chance([60, 120], **kwargs) == pytest.approx(3600 / 3870)  # too short
    assert return_chance([1800, 2400], **kwargs) > return_chance([], **kwargs)
    assert return_chance([9 * 3600] * 4, **kwargs) < 0.2


class ShiftedClock:
    """The wall clock moved back by `offset` seconds (set to 0 to bring it to now)."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() - self.offset


async def test_run_fires_on_a_real_clock_and_stops_when_cancelled() -> None:
    clock = ShiftedClock(offset=269.8)  # the turn happens 269.8 s "ago"...
    agent, provider = sim_agent(registry=make_registry())
    agent = replace(agent, clock=clock, provider=replace(provider, clock=clock))
    session = agent.session()
    await session.send("read_file 'plan.md'")
    clock.offset = 0.0  # ...so its seal is due 0.2 s from now (30 s before expiry)
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    runner = asyncio.create_task(scheduler.run())
    try:
        for _ in range(100):
            if session.records[-1].purpose == "seal":
                break
            await asyncio.sleep(0.05)
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    assert session.records[-1].purpose == "seal"
    assert session.records[-1].explanation.verdict == "kept_warm"


@pytest.mark.parametrize("keep", [True, False])
async def test_openai_extended_retention_carries_a_session_across_a_gap(keep: bool) -> None:
    clock = FrozenClock()
    engine = SimEngine(openai=OpenAIAccountant(OpenAISettings(default_retention="in_memory")))
    provider = SimProvider(engine=engine, clock=clock)
    agent = Agent(
        "gpt-5.5",
        provider=provider,
        registry=make_registry(),
        system=SYSTEM,
        clock=clock,
        cache_policy=CachePolicy(keep_warm=TimePolicy(enabled=keep)),
    )
    session = agent.session()
    await session.send("hello")
    clock.advance(minutes=20)  # past in-memory retention, within 24h retention's idle time
    back = await session.send("still there?")
    assert provider.requests[-1].get("prompt_cache_retention") == ("24h" if keep else None)
    assert (back.records[0].usage.read > 0) is keep


async def test_a_turn_after_a_seal_brings_the_next_keep_warm_forward() -> None:
    # The seal's entry lives an hour; the turn after it writes 5-minute entries, so the
    # next keep-warm is due 270 s after that turn, not an hour after the seal.
    session, scheduler, _ = await _watched()
    await scheduler.idle(300)
    await session.send("and now?")
    turn_started = session.records[-1].started_at
    fired = await scheduler.idle(3600)
    assert fired[0].started_at == turn_started + 270
