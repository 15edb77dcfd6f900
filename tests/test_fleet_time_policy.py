"""The time policy sees the fleet: new sessions of one agent keep its tools and system
prompt warm by arriving (so no session spends on keeping that part for itself), and when
they come slower than the TTL, the session that used it last keeps it warm for them."""

from __future__ import annotations

import pytest

from stoker.agent.agent import Agent
from stoker.agent.keepwarm import KeepWarm
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.bench.fleet import arrivals_run, measure_shared
from stoker.cache.fleet import FleetWatch
from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider


@pytest.mark.parametrize("interval", [2.0, 8.0])
async def test_a_fleet_aware_policy_keeps_new_sessions_warm_for_less(interval: float) -> None:
    shared = await measure_shared(DEFAULT_MODEL)
    alone = await arrivals_run(interval, fleet_aware=False, sessions=8, shared=shared)
    fleet = await arrivals_run(interval, fleet_aware=True, sessions=8, shared=shared)
    assert fleet.first_calls_full == 1.0  # every new session reads the tools and system
    assert fleet.keep_warm_units < alone.keep_warm_units
    assert fleet.cost_ratio < alone.cost_ratio
    if interval < 5:  # arrivals inside the TTL keep it warm by themselves
        assert fleet.keep_warm_calls == 0


def _agent(clock: FrozenClock, provider: SimProvider, fleet: FleetWatch, **kw: object) -> Agent:
    return Agent(
        DEFAULT_MODEL,
        provider=provider,
        tools=TOOLS,
        system=SYSTEM,
        clock=clock,
        fleet=fleet,
        **kw,  # type: ignore[arg-type]
    )


async def test_the_last_session_speaks_for_the_fleet_and_pings_only_the_shared_part() -> None:
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(model=WorkloadModel()), clock=clock)
    fleet = FleetWatch()
    keep_warm = KeepWarm(clock)
    sessions = []
    for n in range(3):
        if n:
            await keep_warm.idle(8 * 60)
        session = _agent(clock, provider, fleet).session()
        await session.send(f"Nightly run {n}: anything new?")
        keep_warm.watch(session)
        sessions.append(session)
    first, _, last = sessions
    # Short one-shot sessions: not worth keeping their own few tokens warm, so the
    # earlier ones plan nothing that sends, and the last one keeps the shared part.
    earlier = first.warm_plan()
    assert earlier is None or not earlier.sends
    plan = last.warm_plan()
    assert plan is not None
    assert plan.scope == "shared"
    assert "new session arrives" in plan.reason
    # The first session's seal left the shared entry a 1-hour one, which each newcomer's
    # read renews for an hour: the fleet's keep-warm is due before that hour ends.
    shared = fleet.get(last.prefix)
    assert shared is not None
    assert plan.at == shared.last_use + 3600 - 30
    fired = await keep_warm.idle(plan.at - clock.now() + 1)
    assert [r.session_id for r in fired] == [last.id]
    request = provider.requests[-1]
    assert [m["content"] for m in request["messages"]][-1][0]["text"].startswith("(keep-warm")
    assert len(request["messages"]) == 1  # the tools and system prompt, and a placeholder
    assert fired[0].usage.read > 4000
    # The next new session reads them, though the last turn was more than 5 minutes ago.
    await keep_warm.idle(3 * 60)
    newcomer = _agent(clock, provider, fleet).session()
    result = await newcomer.send("Nightly run 3: anything new?")
    assert result.records[0].usage.read >= fired[0].usage.read


async def test_the_fleet_can_be_left_out_of_the_policy() -> None:
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(model=WorkloadModel()), clock=clock)
    fleet = FleetWatch()
    policy = CachePolicy(keep_warm=TimePolicy(fleet=False))
    sessions = []
    for n in range(3):
        session = _agent(clock, provider, fleet, cache_policy=policy).session()
        await session.send(f"Nightly run {n}: anything new?")
        sessions.append(session)
        clock.advance(minutes=8)
    plan = sessions[-1].warm_plan()
    assert plan is not None
    assert plan.scope == "session"  # its own history, valued whole
