"""OpenAI's prompt_cache_key is addressed by what sessions share and sharded by traffic:
fresh sessions of one agent read each other's prefix, a lineage never changes key, a
scope keeps users apart, and sessions stored before all this keep their old key."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from stoker.agent.agent import Agent
from stoker.cache.keys import KeyShards, cache_key, lineage_cache_key, user_scope
from stoker.clock import FrozenClock
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from stoker.wire.prefix import CacheParams, Prefix
from tests.helpers import SYSTEM, make_registry
from tests.test_gateway_support import make_rig

MODELS = ["gpt-5.6", "gpt-4.1"]  # regime N (routes by itself) and regime L (routes by key)


def _agent(provider: SimProvider, clock: FrozenClock, model: str, **extra: object) -> Agent:
    return Agent(
        model,
        provider=provider,
        registry=make_registry(),
        system=SYSTEM,
        clock=clock,
        key_shards=extra.pop("key_shards", KeyShards()),  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("model", MODELS)
async def test_a_fresh_session_reads_what_an_earlier_session_of_the_agent_wrote(
    model: str,
) -> None:
    clock = FrozenClock()
    provider = SimProvider(clock=clock)
    shards = KeyShards()
    first = _agent(provider, clock, model, key_shards=shards).session()
    await first.send("Nightly run: anything new?")
    clock.advance(60)
    second = _agent(provider, clock, model, key_shards=shards).session()
    result = await second.send("Nightly run: anything new today?")
    record = result.records[0]
    # Everything but the new question (regime L reads whole 128-token steps).
    assert record.usage.read >= first.records[0].usage.input_total - 128
    assert record.explanation.verdict == "hit"
    keys = {p["prompt_cache_key"] for p in provider.requests}
    assert len(keys) == 1  # one agent, one prefix, one key


async def test_a_lineage_keeps_its_key_through_a_fork_and_a_resume(tmp_path: Path) -> None:
    clock = FrozenClock()
    provider = SimProvider(clock=clock)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await _agent(provider, clock, "gpt-4.1").open(store, "root")
        await session.send("hello")
        await session.fork(role="review").send("anything to remember?")
    async with SQLiteStore(tmp_path / "s.db") as store:
        resumed = await _agent(provider, clock, "gpt-4.1").open(store, "root", create=False)
        await resumed.send("and again")
    keys = [p["prompt_cache_key"] for p in provider.requests]
    assert len(keys) == 3
    assert len(set(keys)) == 1
    assert keys[0] == cache_key(resumed.prefix, "root")
    assert keys[0] != lineage_cache_key("root")


async def test_a_user_scope_keeps_keys_apart() -> None:
    clock = FrozenClock()
    provider = SimProvider(clock=clock)
    alice = _agent(provider, clock, "gpt-5.6", cache_scope=user_scope("alice")).session()
    bob = _agent(provider, clock, "gpt-5.6", cache_scope=user_scope("bob")).session()
    await alice.send("hello")
    result = await bob.send("hello")
    assert result.records[0].usage.read == 0
    keys = [p["prompt_cache_key"] for p in provider.requests]
    assert keys[0] != keys[1]
    assert "alice" not in alice.prefix.params.cache_slot  # type: ignore[operator]


def test_shards_follow_the_observed_rate_on_a_routed_model_only() -> None:
    prefix = Prefix(params=CacheParams(model="gpt-4.1"), system="s")
    shards = KeyShards(per_key_per_minute=10)
    assert shards.shards(prefix, 0.0) == 1
    for n in range(45):
        shards.observe(prefix, n * 1.0)
    # A prefix without a slot has a per-lineage key: nothing shared to balance.
    assert shards.rate(prefix, 45.0) == 0
    slotted = prefix.with_params(cache_slot="0")
    for n in range(45):
        shards.observe(slotted, n * 1.0)
    assert shards.rate(slotted, 45.0) == 45
    assert shards.shards(slotted, 45.0) == 5
    # New lineages join the least busy shard: the empty ones first, lowest index first.
    assert shards.slot(slotted, 45.0, routed=True) == "1"
    shards.observe(slotted.with_params(cache_slot="1"), 45.0)
    assert shards.slot(slotted, 45.0, routed=True) == "2"
    assert shards.slot(slotted, 45.0, routed=False) == "0"
    assert shards.slot(slotted, 45.0, routed=True, scope="u1") == "u1/0"  # its own traffic
    # A minute of quiet: back to one key.
    assert shards.shards(slotted, 200.0) == 1
    with pytest.raises(ValueError, match="per_key_per_minute"):
        KeyShards(per_key_per_minute=20)


def test_a_prefix_stored_without_a_slot_keeps_its_bytes_and_its_old_key() -> None:
    stored = b'{"params":{"effort":null,"model":"gpt-5.6","parallel_tool_calls":true,'
    stored += b'"thinking_budget":null,"tool_choice":"auto"},"system":"s","tools":[]}'
    prefix = Prefix.from_json(stored)
    assert prefix.params.cache_slot is None
    assert prefix.to_json() == stored
    assert cache_key(prefix, "old-session") == lineage_cache_key("old-session")
    slotted = prefix.with_params(cache_slot="0")
    assert Prefix.from_json(slotted.to_json()) == slotted
    assert cache_key(slotted, "a") == cache_key(slotted, "b")  # content, not the session
    assert len(cache_key(slotted, "a")) <= 64


@pytest.mark.parametrize("scope", ["agent", "user"])
async def test_the_gateway_shares_keys_across_users_unless_scoped(
    store: SqlEventStore, scope: Literal["agent", "user"]
) -> None:
    defaults = SessionSettings(system=SYSTEM, model="gpt-5.6")
    rig = make_rig(store, defaults=defaults, cache_key_scope=scope)
    first = await rig.gateway.create_session("alice")
    await rig.gateway.send("alice", first, "hello")
    second = await rig.gateway.create_session("bob")
    answer = await rig.gateway.send("bob", second, "hello")
    keys = [p["prompt_cache_key"] for p in rig.sim.requests]
    if scope == "agent":
        assert keys[0] == keys[1]
        assert answer.requests[0]["usage"]["read"] > 0
    else:
        assert keys[0] != keys[1]
        assert answer.requests[0]["usage"]["read"] == 0
