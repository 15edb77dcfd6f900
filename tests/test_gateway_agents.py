"""The agent cache: when a session keeps its live agent, when it is rebuilt, and what a
rebuilt agent sends. Every test runs on SQLite and on PostgreSQL (the `store` fixture)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest

from stoker.agent.seams import Callbacks
from stoker.gateway.session_settings import SessionSettings
from stoker.gateway.signature import key_digest, signature
from stoker.store.base import SqlEventStore
from stoker.tools import ToolProgress
from tests.store_fixtures import reopen
from tests.test_gateway_support import answered, make_rig


def _wire(payload: dict[str, Any]) -> tuple[str, str]:
    """The tools and system of a provider payload, as the bytes they serialize to."""
    return json.dumps(payload["tools"]), json.dumps(payload["system"])


async def test_same_config_keeps_the_same_agent_instance_across_messages(
    store: SqlEventStore,
) -> None:
    gw = make_rig(store).gateway
    sid = await gw.create_session("alice")
    entry = gw.agents.peek(sid)
    assert entry is not None
    session = entry.session
    for text in ("hello", "read_file 'notes.md'", "thanks", "list_files please"):
        await gw.send("alice", sid, text)
        assert gw.agents.peek(sid) is entry
        assert entry.session is session
    # its own writes never look like another process's
    assert gw.stats["written by another process"] == 0
    assert gw.stats["rebuilt"] == 0


CHANGES: dict[str, dict[str, Any]] = {
    "model": {"model": "claude-sonnet-4-5"},
    "provider": {"provider": "sim-replica"},
    "base_url": {"base_url": "http://127.0.0.1:9/v1"},
    "toolsets": {"toolsets": ("files",)},
    "ephemeral_prompt": {"ephemeral_prompt": "You are answering in a team chat."},
}
MOVES_PREFIX = {"model", "toolsets"}
MOVES_CACHE = {"provider", "key"}  # same bytes, another cache: declared, so it is explained


@pytest.mark.parametrize("name", [*CHANGES, "key"])
async def test_a_changed_setting_changes_the_signature_and_rebuilds(
    store: SqlEventStore, name: str
) -> None:
    rig, sid, entry = await answered(
        store, "first question", api_key="sk-ant-api03-first-key-aaaaaaaaaaaaaaaa"
    )
    gw = rig.gateway
    before = rig.sim.requests[-1]
    old = gw.pool.signature_of(gw.defaults, "alice")

    if name == "key":
        gw.reconfigure(api_key="sk-ant-api03-second-key-bbbbbbbbbbbbbbb")
    else:
        gw.reconfigure(defaults=replace(gw.defaults, **CHANGES[name]))
    assert gw.pool.signature_of(gw.defaults, "alice") != old

    reply = await gw.send("alice", sid, "second question")
    assert gw.agents.peek(sid) is not entry
    assert gw.stats["signature changed"] == 1
    assert gw.stats["rebuilt"] == 1
    after = rig.sim.requests[-1]
    explanation = reply.requests[0]["explanation"]["verdict"]
    if name in MOVES_PREFIX:  # a declared break, recorded with its reason
        assert explanation == "declared"
        assert name.rstrip("s") in reply.requests[0]["declared_break"]
    elif name in MOVES_CACHE:  # the stored prefix, byte for byte, declared as cold
        assert _wire(after) == _wire(before)
        assert explanation == "declared"
        assert reply.requests[0]["declared_break"] == (
            f"the {'API key' if name == 'key' else 'provider'} changed: its cache starts cold"
        )
    else:  # the stored prefix, byte for byte, and the cache read
        assert _wire(after) == _wire(before)
        assert explanation == "hit"
        assert reply.usage.read > 0
    if name == "ephemeral_prompt":
        assert after["messages"][-1]["content"][-1]["text"] == CHANGES[name]["ephemeral_prompt"]
    # and the rebuilt agent is then kept
    await gw.send("alice", sid, "third question")
    assert gw.stats["rebuilt"] == 1


def test_keys_sharing_their_first_8_characters_get_different_signatures() -> None:
    settings = SessionSettings()
    first, second = "sk-ant-a" + "1" * 40, "sk-ant-a" + "2" * 40
    assert first[:8] == second[:8]
    a, b = (
        signature(settings, user="u", api_key_sha256=key_digest(k), registry_generation=0)
        for k in (first, second)
    )
    assert a != b
    assert key_digest(first) == hashlib.sha256(first.encode()).hexdigest()  # the whole key


async def test_evicting_one_session_leaves_the_others(store: SqlEventStore) -> None:
    gw = make_rig(store).gateway
    sids = [await gw.create_session("alice") for _ in range(3)]
    for sid in sids:
        await gw.send("alice", sid, "hello")
    entries = {sid: gw.agents.peek(sid) for sid in sids}
    await gw.send("alice", sids[1], "/model claude-sonnet-4-5")
    assert sids[1] not in gw.agents
    for sid in (sids[0], sids[2]):
        assert gw.agents.peek(sid) is entries[sid]
        await gw.send("alice", sid, "still here")
        assert gw.agents.peek(sid) is entries[sid]


async def test_reasoning_change_applied_in_place_keeps_the_same_system_prompt_object(
    store: SqlEventStore,
) -> None:
    rig, sid, entry = await answered(store)
    gw = rig.gateway
    session, system, tools = entry.session, entry.session.prefix.system, entry.session.prefix.tools

    reply = await gw.send("alice", sid, "/reasoning high")
    assert reply.text.endswith("applied in place")
    assert gw.agents.peek(sid) is entry
    assert entry.session is session
    assert session.prefix.system is system
    assert session.prefix.tools is tools
    assert session.prefix.params.effort == "high"
    assert session.agent.effort == "high"

    answer = await gw.send("alice", sid, "and now?")
    record = answer.requests[0]
    assert record["explanation"]["verdict"] == "declared"
    assert "reasoning" in record["declared_break"]
    assert answer.usage.read > 0  # the tools and system are still read; only messages moved
    assert gw.stats["rebuilt"] == 0


async def test_reasoning_change_rebuilds_when_it_moves_the_cache_namespace(
    store: SqlEventStore,
) -> None:
    """OpenAI's effort rewrites hidden system instructions: a new prefix, so a rebuild."""
    rig, sid, entry = await answered(store, model="gpt-5.5")
    gw = rig.gateway
    reply = await gw.send("alice", sid, "/reasoning high")
    assert reply.text.endswith("rebuilt")
    assert sid not in gw.agents
    answer = await gw.send("alice", sid, "and now?")
    assert gw.agents.peek(sid) is not entry
    assert answer.requests[0]["explanation"]["verdict"] == "declared"


async def test_callbacks_are_swapped_between_messages_without_eviction(
    store: SqlEventStore,
) -> None:
    gw = make_rig(store).gateway
    sid = await gw.create_session("alice")
    first: list[str] = []
    second: list[str] = []
    tools: list[ToolProgress] = []
    await gw.send("alice", sid, "hello", callbacks=Callbacks(on_text=first.append))
    entry = gw.agents.peek(sid)
    assert entry is not None
    await gw.send(
        "alice",
        sid,
        "read_file 'notes.md'",
        callbacks=Callbacks(on_text=second.append, on_tool=tools.append),
    )
    assert gw.agents.peek(sid) is entry
    assert "".join(first) == "Understood: hello"  # streamed, in pieces
    assert "".join(second) == "Done. Tool results: read_file ok: notes.md"
    assert [(t.name, t.phase) for t in tools] == [("read_file", "start"), ("read_file", "end")]


async def test_a_rebuilt_agent_sends_identical_tools_and_system_and_reads_the_cache(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    sid = await rig.gateway.create_session("alice")
    await rig.gateway.send("alice", sid, "read_file 'notes.md'")
    before = rig.sim.requests[-1]

    restarted = rig.another_process(store)  # a new process: nothing cached
    reply = await restarted.send("alice", sid, "what did it say?")
    assert restarted.stats["rebuilt"] == 1
    after = rig.sim.requests[-1]
    assert _wire(after) == _wire(before)
    assert after["messages"][: len(before["messages"])][:-1] == before["messages"][:-1]
    record = reply.requests[0]
    assert record["explanation"]["verdict"] == "hit"
    assert reply.usage.read > 0
    assert reply.usage.uncached + reply.usage.written < 100


async def test_another_process_writing_to_the_session_rebuilds_the_cached_agent(
    store: SqlEventStore,
) -> None:
    rig, sid, entry = await answered(store, "one")
    gw = rig.gateway

    other_store = reopen(store)
    try:
        await rig.another_process(other_store).send("alice", sid, "two, from elsewhere")
    finally:
        await other_store.close()

    reply = await gw.send("alice", sid, "three")
    assert gw.agents.peek(sid) is not entry
    assert gw.stats["written by another process"] == 1
    assert reply.requests[0]["explanation"]["verdict"] == "hit"
    view = await gw.view("alice", sid)
    assert [t.user for t in view.turns] == ["one", "two, from elsewhere", "three"]
    await gw.send("alice", sid, "four")  # and its own writes do not trigger it again
    assert gw.stats["written by another process"] == 1
