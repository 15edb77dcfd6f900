"""Synchronous calls (`agent.run_sync`, `session.send_sync`) outside and inside an event
loop, agents as plain context managers, and the library's background keep-warm: on by
default while an agent is open, off with `keep_warm=False`, stopped when it closes."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from stoker import Agent, ConfigError, FrozenClock
from stoker.testing import assert_no_undeclared_breaks
from tests.helpers import SYSTEM, sim_agent


class City(BaseModel):
    name: str
    population: int


def test_run_sync_answers_outside_an_event_loop() -> None:
    with Agent("sim:claude-sonnet-4-6", system=SYSTEM) as agent:
        result = agent.run_sync("hello there")
        typed = agent.run_sync("a city", output=City)
    assert result.text == "Understood: hello there"
    assert isinstance(typed.output, City)
    assert agent.portal.loop is None  # closing the agent stopped its loop thread


def test_send_sync_keeps_one_loop_for_the_sessions_calls() -> None:
    agent, _ = sim_agent()
    session = agent.session()
    first = session.send_sync("one")
    loop = agent.portal.loop
    second = session.send_sync("two")
    assert agent.portal.loop is loop  # the provider's connections stay on one loop
    assert second.records[0].usage.read > 0
    assert first.text == "Understood: one"
    assert_no_undeclared_breaks(session.records)
    agent.close()
    assert not any(t.name == "stoker-portal" for t in threading.enumerate())


async def test_sync_calls_inside_a_running_loop_say_to_await() -> None:
    agent, _ = sim_agent()
    session = agent.session()
    with pytest.raises(ConfigError, match="await"):
        session.send_sync("hi")
    with pytest.raises(ConfigError, match="await"):
        agent.run_sync("hi")
    assert session.history == ()  # nothing was sent


async def test_open_agents_keep_their_sessions_warm_through_an_idle_gap() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(clock=clock)
    async with agent:
        session = agent.session()
        await session.send("first question")
        await clock.pass_time(minutes=30)  # past the 5-minute TTL: the time policy acts
        kept = [r for r in session.records if r.purpose != "turn"]
        assert kept, "the agent's keep-warm sent nothing through the gap"
        result = await session.send("after the gap")
        assert result.records[0].usage.read >= session.records[0].usage.written
    assert clock.timers == []  # closing the agent stopped its timer


async def test_keep_warm_false_lets_the_entry_expire() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(clock=clock, keep_warm=False)
    async with agent:
        session = agent.session()
        await session.send("first question")
        await clock.pass_time(minutes=30)
        result = await session.send("after the gap")
    assert all(r.purpose == "turn" for r in session.records)
    assert result.records[0].explanation.verdict == "expired"


async def test_a_session_made_without_a_loop_gets_no_timer() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(clock=clock)
    session = await asyncio.to_thread(agent.session)  # no event loop in that thread
    assert session is not None
    assert clock.timers == []


async def test_the_background_timer_runs_on_a_real_clock_and_stops_with_the_agent() -> None:
    async with Agent("sim:claude-sonnet-4-6", system=SYSTEM) as agent:
        session = agent.session()
        await session.send("hello")
        assert agent.warmth is not None
        running = [t for t in asyncio.all_tasks() if t.get_name() == "stoker-keep-warm"]
        assert len(running) == 1
        assert session.warm_plan() is not None  # it has something to keep
    await asyncio.sleep(0)
    assert running[0].done()
