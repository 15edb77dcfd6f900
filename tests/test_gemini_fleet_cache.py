"""One Gemini explicit cache of an agent's tools and system prompt for its whole fleet
(`stoker.cache.fleet_cache`): new sessions read the live one instead of each making their
own, extend it while their arrivals pay for its storage, and share it across replicas
through the fleet's notes, never across accounts. On the simulated Gemini, whose storage
bill every figure is held to."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.agent.agent import Agent
from stoker.agent.keepwarm import KeepWarm
from stoker.cache.fleet import FleetWatch
from stoker.cache.fleet_cache import arrivals_per_hour, fleet_keeps
from stoker.cache.fleet_notes import Outbox
from stoker.cache.keys import KeyShards
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.record import observe_records
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.gateway.fleet_sync import FleetSync
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.wire.record import CacheRecord
from tests.helpers import SYSTEM, make_registry

MODEL = "gemini-2.5-flash"
GUARANTEED = CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0))


def _agent(clock: FrozenClock, provider: SimProvider, fleet: FleetWatch) -> Agent:
    return Agent(
        MODEL,
        provider=provider,
        registry=make_registry(),
        system=SYSTEM,
        clock=clock,
        cache_policy=GUARANTEED,
        keep_warm=False,
        fleet=fleet,
    )


async def _arrivals(agent: Agent, clock: FrozenClock, *, every: float, n: int) -> list[CacheRecord]:
    """`n` new sessions, one every `every` seconds, each a short job; every record."""
    records: list[CacheRecord] = []
    with observe_records(records.append):
        for i in range(n):
            if i:
                clock.advance(every)
            await agent.session().send(f"read_file the plan {i}, please")
    return records


def _storage_hours(provider: SimProvider) -> float:
    return provider.engine.google.storage_billed(provider.workspace) / 3600.0


def test_the_fleet_keeps_its_cache_while_arrivals_pay_for_its_storage() -> None:
    info = model_info(MODEL)  # storage 3.3x input per token-hour; a creation 1.0x
    policy = TimePolicy(implicit_trust=0.0)
    assert arrivals_per_hour([]) is None
    assert arrivals_per_hour([600.0, 1200.0]) == pytest.approx(4.0)
    assert fleet_keeps(info, policy, [1000.0] * 4)  # 3.6 an hour save more than they cost
    assert not fleet_keeps(info, policy, [1200.0] * 4)  # 3.0 an hour do not
    assert not fleet_keeps(info, policy, [])  # one session: nothing to weigh yet


async def test_new_sessions_read_one_cache_and_extend_it_while_they_arrive() -> None:
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(), clock=clock)
    agent = _agent(clock, provider, FleetWatch())
    records = await _arrivals(agent, clock, every=300.0, n=12)
    made = [r for r in records if r.purpose == "cache_create"]
    assert len(made) == 1  # one cache for twelve sessions over 55 minutes
    extended = [r for r in records if r.purpose == "cache_extend"]
    assert len(extended) == 1  # by the first session to find it less than half-lived
    firsts = [r for r in records if r.purpose == "turn" and r.usage.read][::2]
    assert all(r.usage.read >= made[0].usage.written_1h for r in firsts)
    billed = sum(r.storage_token_hours or 0.0 for r in records)
    assert billed == pytest.approx(_storage_hours(provider))  # the records add up to the bill
    # one cache per session (what each made before) would have stored twelve
    assert billed < 2 * made[0].usage.written_1h


async def test_sessions_rarer_than_the_break_even_let_each_cache_run_out() -> None:
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(), clock=clock)
    agent = _agent(clock, provider, FleetWatch())
    records = await _arrivals(agent, clock, every=1800.0, n=6)  # 2 an hour: storage costs more
    assert not [r for r in records if r.purpose == "cache_extend"]
    made = [r for r in records if r.purpose == "cache_create"]
    assert len(made) == 3  # each lives its hour and is read by the next session in it


async def test_another_replica_reads_the_cache_through_the_notes() -> None:
    clock = FrozenClock()
    engine = SimEngine()  # one provider account, two processes
    first, second = FleetWatch(), FleetWatch()
    outbox = Outbox()
    first.share(outbox)
    one = _agent(clock, SimProvider(engine=engine, clock=clock), first)
    made = await _arrivals(one, clock, every=0.0, n=1)
    for note in outbox.drain():  # what the store carries between replicas
        second.absorb(note)
    clock.advance(60)
    other = _agent(clock, SimProvider(engine=engine, clock=clock), second)
    read = await _arrivals(other, clock, every=0.0, n=1)
    assert [r.purpose for r in made][:1] == ["cache_create"]
    assert [r.purpose for r in read] == ["turn", "turn"]  # none made: it read the first's
    assert read[0].usage.read >= made[0].usage.written_1h


async def test_a_cache_of_another_account_is_never_named() -> None:
    clock = FrozenClock()
    fleet = FleetWatch()  # one process, two API keys
    one = _agent(clock, SimProvider(engine=SimEngine(), clock=clock), fleet)
    await _arrivals(one, clock, every=0.0, n=1)
    other = _agent(clock, SimProvider(engine=SimEngine(), clock=clock), fleet)
    records = await _arrivals(other, clock, every=0.0, n=1)
    assert records[0].purpose == "cache_create"  # its own, not the other account's
    assert records[1].usage.read >= records[0].usage.written_1h


async def test_replicas_share_the_cache_through_the_store(tmp_path: Path) -> None:
    """Two gateway replicas on one database (`FleetSync`, as they share key shards and
    arrivals): the second's new session reads the cache the first's made."""
    clock = FrozenClock()
    engine = SimEngine()
    a_store = SQLiteStore(tmp_path / "fleet.db")
    b_store = SQLiteStore(tmp_path / "fleet.db")
    a_fleet, b_fleet = FleetWatch(), FleetWatch()
    a = FleetSync(a_store, shards=KeyShards(), fleet=a_fleet, holder="a", clock=clock)
    b = FleetSync(b_store, shards=KeyShards(), fleet=b_fleet, holder="b", clock=clock)
    try:
        one = _agent(clock, SimProvider(engine=engine, clock=clock), a_fleet)
        made = await _arrivals(one, clock, every=0.0, n=1)
        await a.sync()
        clock.advance(30)
        await b.sync()
        other = _agent(clock, SimProvider(engine=engine, clock=clock), b_fleet)
        read = await _arrivals(other, clock, every=0.0, n=1)
    finally:
        await a_store.close()
        await b_store.close()
    assert made[0].purpose == "cache_create"
    assert [r.purpose for r in read] == ["turn", "turn"]
    assert read[0].usage.read >= made[0].usage.written_1h


async def test_its_maker_does_not_end_it_at_a_gap_while_the_fleet_arrives() -> None:
    """The session that made the cache goes quiet (its user gone) while new sessions keep
    arriving: its own time policy, watching its gap, neither deletes nor extends it."""
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(), clock=clock)
    agent = _agent(clock, provider, FleetWatch())
    maker = agent.session()
    records: list[CacheRecord] = []
    with observe_records(records.append):
        await maker.send("read_file the plan, please")
        warm = KeepWarm(clock)
        warm.watch(maker)
        for i in range(10):
            await warm.idle(300)
            await agent.session().send(f"read_file the plan {i}, please")
    ended = [r for r in records if r.session_id == maker.id and r.purpose == "cache_delete"]
    assert ended == []
    assert sum(1 for r in records if r.purpose == "cache_create") == 1


async def test_a_cache_deleted_behind_the_fleets_back_is_forgotten_and_made_again() -> None:
    """Another process deletes the fleet's cache: the next session that names it gets the
    404, answers without it and tells the fleet; the session after makes a new one."""
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(), clock=clock)
    agent = _agent(clock, provider, FleetWatch())
    first = await _arrivals(agent, clock, every=0.0, n=1)
    google = provider.engine.google
    for cache in google.list_caches(at=clock.now(), workspace=provider.workspace):
        google.delete_cache(cache.name, at=clock.now(), workspace=provider.workspace)
    clock.advance(60)
    named = await _arrivals(agent, clock, every=0.0, n=1)
    clock.advance(60)
    after = await _arrivals(agent, clock, every=0.0, n=1)
    assert first[0].purpose == "cache_create"
    assert [r.purpose for r in named] == ["turn", "turn"]  # answered, without the cache
    assert after[0].purpose == "cache_create"  # not the dead one's name again
    assert after[1].usage.read >= after[0].usage.written_1h
