"""Gemini across idle time: keep-warm pings for its implicit cache, and explicit cache
objects created, read, extended and deleted by the time policy's storage arithmetic, each
lifecycle call a record with its cost; nothing left behind when the agent closes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker import Agent
from stoker.agent.fallback import Route
from stoker.agent.keepwarm import KeepWarm
from stoker.agent.session import Session
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.prices import PriceBook
from stoker.cache.storage import Stored, decide_storage
from stoker.cache.time_policy import Idle, TimePolicy
from stoker.clock import FrozenClock
from stoker.errors import ProviderError
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.report.build import build_report
from stoker.store.sqlite import SQLiteStore
from stoker.wire.figures import json_usd
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from tests.helpers import SYSTEM, make_registry

MODEL = "gemini-2.5-flash"


class Down(ProviderWrapper):
    """A provider that answers 529 (overloaded) while `down`."""

    down = False

    async def complete(self, request: Request, context: CallContext) -> Completion:
        if self.down:
            raise ProviderError("HTTP 529: Overloaded", provider="sim", status=529)
        return await self.inner.complete(request, context)


GUARANTEED = CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0))


def _agent(
    clock: FrozenClock,
    policy: CachePolicy | None = None,
    *,
    engine: SimEngine | None = None,
    **options: Any,
) -> tuple[Agent, SimProvider]:
    """An agent on the simulated Gemini; `engine` is another process's provider state."""
    provider = SimProvider(engine=engine or SimEngine(), clock=clock)
    agent = Agent(
        MODEL,
        provider=provider,
        registry=make_registry(),
        system=SYSTEM,
        clock=clock,
        cache_policy=policy or CachePolicy(),
        keep_warm=False,
        **options,
    )
    return agent, provider


async def _cached_then_idle(clock: FrozenClock) -> tuple[SimProvider, Session, KeepWarm]:
    """A session whose first call made an explicit cache, watched through a minute idle."""
    agent, provider = _agent(clock, GUARANTEED)
    session = agent.session()
    await session.send("read_file the plan, please")
    warm = KeepWarm(clock)
    warm.watch(session)
    await warm.idle(60)
    return provider, session, warm


async def test_a_gap_past_the_implicit_lifetime_is_crossed_with_pings() -> None:
    clock = FrozenClock()
    agent, _ = _agent(clock)
    session = agent.session()
    await session.send("hello")
    await session.send("tell me more")
    warm = KeepWarm(clock)
    warm.watch(session)
    pings = await warm.idle(360)
    assert [r.purpose for r in pings] == ["ping", "ping"]  # an entry lives 180 s after use
    after = await session.send("and now?")
    assert after.records[0].explanation.verdict == "hit"
    assert after.records[0].usage.read >= session.records[1].usage.input_total


async def test_an_explicit_cache_carries_the_prefix_across_a_gap_and_is_deleted_at_close() -> None:
    clock = FrozenClock()
    agent, provider = _agent(clock, GUARANTEED)
    session = agent.session()
    await session.send("read_file the plan, please")
    await session.send("and list_files too")
    created = session.records[0]  # the tools and system, cached before the first call
    assert created.purpose == "cache_create"
    warm = KeepWarm(clock)
    warm.watch(session)
    lifecycle = await warm.idle(600)
    # it outlives the gap: nothing is created again, nothing billed twice
    assert not any(r.purpose == "cache_create" for r in lifecycle)
    assert created.usage.written_1h > 1024  # its creation is billed as input
    assert created.storage_token_hours > 0
    info = model_info(MODEL)
    assert info.price is not None
    assert info.storage is not None
    expected = info.price.cost(created.usage) + created.storage_token_hours * info.storage / 1e6
    assert created.cost_usd == pytest.approx(expected)
    back = await session.send("what should we do first?")
    first = back.records[0]
    assert provider.requests[-1]["cachedContent"]  # the request named the cache
    assert first.cache_read == created.usage.written_1h
    assert first.usage.read >= first.cache_read
    fork = await session.fork(role="review").send("anything to remember?")
    assert fork.records[0].usage.read >= created.usage.written_1h
    await agent.aclose()
    records: list[CacheRecord] = list(session.records)
    deleted = records[-1]
    assert deleted.purpose == "cache_delete"
    assert deleted.storage_token_hours < 0  # the storage not used is given back
    # Stoker's storage records add up to what the simulated provider billed
    billed = provider.engine.google.storage_billed("default") / 3600
    assert sum(r.storage_token_hours for r in records) == pytest.approx(billed)
    assert provider.engine.google.list_caches(at=clock.now(), workspace="default") == []


async def test_a_cache_the_history_no_longer_starts_with_is_deleted_at_once() -> None:
    clock = FrozenClock()
    provider, session, warm = await _cached_then_idle(clock)
    assert session.records[0].purpose == "cache_create"
    await session.rebase(reason="a new system prompt", system=SYSTEM + " Be brief.")
    await session.send("go on")
    clock.advance(1)
    records = await warm.idle(1)
    assert [r.purpose for r in records][:1] == ["cache_delete"]
    assert provider.engine.google.list_caches(at=clock.now(), workspace="default") == []


async def test_a_resumed_conversation_carries_its_history_across_a_gap_in_a_new_cache(
    tmp_path: Path,
) -> None:
    clock = FrozenClock()
    agent, provider = _agent(clock, GUARANTEED)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "g1")
        await session.send("read_file the plan, please")
        await agent.aclose()  # the process ends: its cache is deleted
        later, _ = _agent(clock, GUARANTEED, engine=provider.engine)
        resumed = await later.open(store, "g1", create=False)
        await resumed.send("go on")
        # its history was billed in the other process: no cache before this first call
        assert [r.purpose for r in resumed.records] == ["turn"]
        warm = KeepWarm(clock)
        warm.watch(resumed)
        (created,) = (r for r in await warm.idle(600) if r.purpose == "cache_create")
        assert created.fingerprints.message_count == len(resumed.history)
        back = await resumed.send("and then?")
        assert back.records[0].cache_read == created.usage.written_1h
        await later.aclose()
    assert provider.engine.google.list_caches(at=clock.now(), workspace="default") == []


async def test_the_agent_sweeps_what_a_dead_process_left_behind() -> None:
    clock = FrozenClock()
    provider, _, _ = await _cached_then_idle(clock)
    (held,) = provider.engine.google.list_caches(at=clock.now(), workspace="default")
    # a new process: the old one died without deleting its cache
    restarted = SimProvider(engine=provider.engine, clock=clock)
    fresh = Agent(MODEL, provider=restarted, system=SYSTEM, clock=clock, keep_warm=False)
    assert await fresh.sweep_caches() == [held.name]
    assert await fresh.sweep_caches() == []


def test_storage_never_beats_trusting_the_implicit_cache_for_one_return() -> None:
    info = model_info(MODEL)
    idle = Idle(refreshed_at=0.0, live_for=180.0, idle_since=0.0, cached=8000, tail=100)
    net, plan = decide_storage(idle, info, TimePolicy(), now=0.0, held=None, gaps=[3600.0])
    # one read saves (1 - 0.1) x 8,100 while creating costs 8,100 and storage more
    assert (net, plan) == (0.0, None)


def test_storage_pays_when_only_guaranteed_discounts_count_and_a_return_reads_often() -> None:
    info = model_info(MODEL)
    idle = Idle(refreshed_at=0.0, live_for=180.0, idle_since=0.0, cached=8000, tail=100)
    policy = TimePolicy(implicit_trust=0.0)
    net, plan = decide_storage(idle, info, policy, now=0.0, held=None, calls_per_turn=12.0)
    assert plan is not None
    assert plan.action == "cache_create"
    assert net > 0
    assert plan.cost > info.write_1h * 8100  # creation plus storage


def test_a_held_cache_is_extended_when_a_return_is_still_likely_and_deleted_when_not() -> None:
    info = model_info(MODEL)
    idle = Idle(refreshed_at=0.0, live_for=180.0, idle_since=0.0, cached=8000, tail=0)
    held = Stored(
        name="cachedContents/a",
        tokens=8000,
        messages=2,
        prefix_key="k",
        chain="c",
        created_at=0.0,
        expires_at=300.0,
        owner="s",
    )
    policy = TimePolicy(implicit_trust=0.0)
    _, extend = decide_storage(
        idle, info, policy, now=280.0, held=held, calls_per_turn=12.0, gaps=[400.0] * 5
    )
    assert extend is not None
    assert extend.action == "cache_extend"
    _, drop = decide_storage(
        idle, info, policy, now=280.0, held=held, calls_per_turn=1.0, gaps=[10 * 86400.0] * 5
    )
    assert drop is not None
    assert drop.action == "cache_delete"


@pytest.mark.breaks_cache(reason="a fallback to another provider is a declared break")
async def test_a_gemini_fallback_takes_an_anthropic_primarys_turn() -> None:
    clock = FrozenClock()
    primary = Down(SimProvider(engine=SimEngine(), clock=clock))
    backup = SimProvider(engine=SimEngine(), clock=clock)
    agent = Agent(
        "claude-sonnet-4-6",
        provider=primary,
        system=SYSTEM,
        clock=clock,
        thinking_budget=1024,
        max_tokens=2048,
        fallbacks=[Route(provider=backup, model=MODEL, spec=f"sim:{MODEL}")],
        keep_warm=False,
    )
    session = agent.session()
    await session.send("hello")
    primary.down = True
    detour = await session.send("still there?")
    (call,) = detour.records
    assert call.model == MODEL
    assert call.fallback_of == "claude-sonnet-4-6"
    sent = backup.requests[-1]
    # Anthropic's signed thinking is never sent to Gemini
    assert not any(p.get("thought") for c in sent["contents"] for p in c["parts"])


async def test_lifecycle_calls_are_spans_with_their_storage() -> None:
    from tests.test_telemetry import Observed

    observed = Observed()
    clock = FrozenClock()
    agent, _ = _agent(clock, GUARANTEED, telemetry=observed.telemetry)
    session = agent.session()
    await session.send("read_file the plan, please")
    (created,) = (r for r in session.records if r.purpose == "cache_create")
    await session.send("go on")
    spans = {
        s.attributes["stoker.call.purpose"]: s
        for s in observed.finished()
        if s.attributes and "stoker.call.purpose" in s.attributes
    }
    span = spans["cache_create"]
    assert span.attributes is not None
    assert span.attributes["stoker.cache.storage_token_hours"] == created.storage_token_hours
    assert span.attributes["gen_ai.request.model"] == MODEL
    turn = [
        s
        for s in observed.finished()
        if s.attributes and s.attributes.get("stoker.cache.object_read_tokens")
    ]
    assert turn


async def test_the_report_shows_storage_beside_reads_and_writes(tmp_path: Path) -> None:
    clock = FrozenClock()
    agent, _ = _agent(clock, GUARANTEED)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "g1")
        await session.send("read_file the plan, please")
        warm = KeepWarm(clock)
        warm.watch(session)
        await warm.idle(600)
        await session.send("go on")
        await agent.aclose()
        report = await build_report(store, "g1", prices=PriceBook())
    (lineage,) = report.lineages
    info = model_info(MODEL)
    assert info.storage is not None
    hours = sum(r.storage_token_hours for r in session.records)
    assert hours > 0
    assert lineage.storage_usd == pytest.approx(hours * info.storage / 1e6)
    purposes = [c.record.purpose for c in lineage.calls]
    assert purposes.count("cache_create") == 1
    assert purposes[-1] == "cache_delete"
    assert lineage.to_dict()["storage_usd"] == json_usd(lineage.storage_usd)
    # the records came back from the store with their storage
    stored = [c.record.storage_token_hours for c in lineage.calls]
    assert sum(stored) == pytest.approx(hours)


async def test_the_library_default_keeps_gemini_warm_while_the_agent_is_open() -> None:
    clock = FrozenClock()
    provider = SimProvider(engine=SimEngine(), clock=clock)
    async with Agent(MODEL, provider=provider, system=SYSTEM, clock=clock) as agent:
        session = agent.session()
        await session.send("hello")
        await session.send("tell me more")
        await clock.pass_time(360)
        assert [r.purpose for r in session.records[2:]] == ["ping", "ping"]
        after = await session.send("and now?")
        assert after.records[0].explanation.verdict == "hit"


async def test_the_first_call_reads_tools_and_system_from_a_cache_made_before_it() -> None:
    clock = FrozenClock()
    agent, provider = _agent(clock, GUARANTEED)
    session = agent.session()
    await session.send("read_file the plan, please")
    created, *turn = session.records
    assert created.purpose == "cache_create"
    assert created.fingerprints.message_count == 0  # tools and system only: no history
    (cache,) = provider.engine.google.list_caches(at=clock.now(), workspace="default")
    assert created.usage.written_1h == cache.tokens >= model_info(MODEL).min_cacheable
    assert len(turn) >= 2
    assert all(r.purpose == "turn" for r in turn)
    # every call of the turn, its first included, named the cache and read it whole
    assert [p.get("cachedContent") for p in provider.requests] == [cache.name] * len(turn)
    assert all(r.cache_read == cache.tokens for r in turn)
    # nothing was billed twice: each token of the turn's last request was billed at the
    # write price once (the tools and system by the creation, each message when sent)
    billed = sum(r.usage.written + r.usage.uncached for r in session.records)
    assert billed == turn[-1].usage.input_total
    # a fork reads the parent's cache and makes none of its own
    fork = session.fork(role="review")
    await fork.send("anything to remember?")
    assert [r.purpose for r in fork.records] == ["turn"]
    assert provider.requests[-1]["cachedContent"] == cache.name
    assert fork.records[0].cache_read == cache.tokens


async def test_no_cache_is_made_before_the_first_call_when_the_implicit_cache_is_trusted() -> None:
    clock = FrozenClock()
    agent, provider = _agent(clock)  # implicit_trust 1.0: the implicit cache is counted on
    session = agent.session()
    await session.send("read_file the plan, please")
    assert all(r.purpose == "turn" for r in session.records)
    assert provider.engine.google.list_caches(at=clock.now(), workspace="default") == []
    # nor when the tools and system are below the model's minimum for a cache
    small = Agent(
        MODEL,
        provider=provider,
        system="Be brief.",
        clock=clock,
        cache_policy=GUARANTEED,
        keep_warm=False,
    )
    short = small.session()
    await short.send("hello")
    assert all(r.purpose == "turn" for r in short.records)
    assert provider.engine.google.list_caches(at=clock.now(), workspace="default") == []
