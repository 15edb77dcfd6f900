"""An outage is not a tool-set change.

A toolset the session used that is no longer registered (its server is down, a replica
started without it) stays in `tools[]`; calls to it come back to the model as a tool
error, the session keeps answering with the same prefix bytes, and the toolset works
again when it returns. A deliberate configuration change that drops a tool the session
used is answered once with a 409 saying what to do; the session then goes on.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.errors import ToolError, ToolUnavailable
from stoker.gateway.service import Gateway
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from stoker.tools import ToolContext, ToolRegistry, run_tool_calls, unavailable_tool
from stoker.wire.blocks import ToolUseBlock
from stoker.wire.messages import UserMessage
from tests.helpers import make_registry, sim_agent
from tests.test_gateway_support import Rig, auth, client, make_rig


def _error_text(name: str) -> str:
    """What the model reads when it calls a tool whose toolset is down."""
    return f"tool {name}: {ToolUnavailable(name)}"


def _wire(payload: dict[str, Any]) -> tuple[str, str]:
    """The tools and system of a provider payload, as the bytes they serialize to."""
    return json.dumps(payload["tools"]), json.dumps(payload["system"])


def _replica(rig: Rig, store: SqlEventStore, registry: ToolRegistry) -> Gateway:
    """Another process on the same store and provider, with its own tool registry."""
    return Gateway(
        store=store,
        defaults=rig.gateway.defaults,
        provider_factory=rig.factory,
        registry=registry,
        clock=rig.clock,
    )


def _without(registry: ToolRegistry, name: str) -> ToolRegistry:
    return ToolRegistry([t for t in registry if t.name != name])


def _last_results(rig: Rig) -> list[dict[str, Any]]:
    """The tool results of the last request the simulator received."""
    for message in reversed(rig.sim.requests[-1]["messages"]):
        blocks = message["content"] if isinstance(message["content"], list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            return results
    return []


def _verdicts(replies: list[Any]) -> list[tuple[str, str | None]]:
    return [
        (r["explanation"]["verdict"], r["declared_break"])
        for reply in replies
        for r in reply.requests
    ]


def test_a_missing_toolset_is_refused_for_a_new_prefix_and_left_out_of_what_can_run() -> None:
    registry = _without(make_registry(), "shell")
    with pytest.raises(ToolError, match="unknown toolset 'shell'"):
        registry.resolve(["files", "shell"])
    assert [t.name for t in registry.available(["files", "shell"])] == ["list_files", "read_file"]
    assert [t.name for t in registry.available(None, ["files", "shell"])] == ["memory_add"]


async def test_a_stand_in_sends_the_stored_bytes_and_answers_any_call_as_unavailable() -> None:
    real = make_registry().get("files").tools[0]
    stand_in = unavailable_tool(real.spec_bytes)
    assert stand_in.spec_bytes == real.spec_bytes
    calls = [
        ToolUseBlock(id="c1", name=real.name, input_json=b'{"text":"a.md"}'),
        ToolUseBlock(id="c2", name=real.name, input_json=b'{"not":"in the schema"}'),
    ]
    results = await run_tool_calls(
        calls,
        {real.name: stand_in},
        context_factory=lambda call: ToolContext(session_id="s", tool_use_id=call.id),
    )
    assert [(r.content, r.is_error) for r in results] == [(_error_text(real.name), True)] * 2


async def test_a_used_toolset_that_goes_away_and_comes_back_never_stops_the_session(
    store: SqlEventStore,
) -> None:
    calls: list[str] = []
    rig = make_rig(store, registry=make_registry(calls))
    gw = rig.gateway
    sid = await gw.create_session("alice")
    first = await gw.send("alice", sid, "read_file 'notes.md'")
    assert calls == ["read_file"]
    before = _wire(rig.sim.requests[-1])
    replies = [first]

    # Another replica started while the files server is down: it has no 'files' toolset.
    replica = _replica(rig, store, _without(make_registry(calls), "files"))
    down = await replica.send("alice", sid, "read_file 'notes.md' again")
    replies.append(down)
    assert replica.stats["rebuilt"] == 1
    assert calls == ["read_file"]  # nothing ran
    results = [(r["content"], r.get("is_error")) for r in _last_results(rig)]
    assert results == [(_error_text("read_file"), True)]  # what the model saw
    assert down.text == "Done. Tool results: " + _error_text("read_file")[:120]  # answered
    assert _wire(rig.sim.requests[-1]) == before

    # The replica's own toolset comes back: same process, the registry changes.
    replica.pool.registry.register(make_registry(calls).get("files"))  # type: ignore[union-attr]
    back = await replica.send("alice", sid, "read_file 'notes.md' once more")
    replies.append(back)
    assert calls == ["read_file", "read_file"]
    assert back.text == "Done. Tool results: read_file ok: notes.md"
    assert _wire(rig.sim.requests[-1]) == before

    # And the first process, whose registry loses it now, keeps answering too.
    gw.pool.registry.unregister("files")  # type: ignore[union-attr]
    again = await gw.send("alice", sid, "list_files 'docs'")
    replies.append(again)
    assert again.text.startswith(f"Done. Tool results: {_error_text('list_files')[:60]}")
    assert _wire(rig.sim.requests[-1]) == before

    # Every call read the cache: no break at all, declared or not.
    assert {v for v in _verdicts(replies[1:])} == {("hit", None)}
    view = await gw.view("alice", sid)
    assert [t.user for t in view.turns] == [
        "read_file 'notes.md'",
        "read_file 'notes.md' again",
        "read_file 'notes.md' once more",
        "list_files 'docs'",
    ]


async def test_a_configured_toolset_that_is_not_registered_is_an_outage(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    gw = rig.gateway
    gw.reconfigure(defaults=replace(gw.defaults, toolsets=("files", "shell")))
    sid = await gw.create_session("alice")
    await gw.send("alice", sid, "run_shell 'ls'")
    before = _wire(rig.sim.requests[-1])

    replica = _replica(rig, store, _without(make_registry(), "shell"))
    reply = await replica.send("alice", sid, "run_shell 'ls' again")
    assert reply.text.startswith(f"Done. Tool results: {_error_text('run_shell')[:60]}")
    assert _wire(rig.sim.requests[-1]) == before
    assert _verdicts([reply]) == [("hit", None), ("hit", None)]


async def test_a_resumed_library_session_keeps_a_missing_registry_tool_as_unavailable(
    store: SqlEventStore,
) -> None:
    calls: list[str] = []
    agent, provider = sim_agent(registry=make_registry(calls))
    session = await agent.open(store, "s1")
    await session.send("read_file 'a.md'")
    before = provider.requests[-1]["tools"]

    down = replace(agent, registry=_without(make_registry(calls), "files"))
    resumed = await down.open(store, "s1", create=False)
    assert resumed.prefix == session.prefix
    result = await resumed.send("read_file 'b.md'")
    assert provider.requests[-1]["tools"] == before
    answer = resumed.history[-2]
    assert isinstance(answer, UserMessage)
    assert [(r.content, r.is_error) for r in answer.tool_results] == [
        (_error_text("read_file"), True)
    ]
    assert calls == ["read_file"]
    assert [r.explanation.verdict for r in result.records] == ["hit", "hit"]


async def test_removing_a_used_toolset_by_configuration_is_a_409_once_then_the_session_goes_on(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    gw = rig.gateway
    async with client(rig) as c:
        r = await c.post("/v1/sessions", json={}, headers=auth("alice"))
        sid = r.json()["id"]
        url = f"/v1/sessions/{sid}/messages"
        for text in ("read_file 'a.md'", "memory_add 'tea'"):
            r = await c.post(url, json={"text": text}, headers=auth("alice"))
            assert r.status_code == 200
            assert r.json()["text"].startswith("Done. Tool results: ")
        before = {t["name"]: t for t in rig.sim.requests[-1]["tools"]}

        gw.reconfigure(defaults=replace(gw.defaults, disabled_toolsets=("files",)))
        r = await c.post(url, json={"text": "what now?"}, headers=auth("alice"))
        assert r.status_code == 409
        error = r.json()["error"]
        assert error["type"] == "tools_removed"
        assert error["tools"] == ["read_file"]
        assert error["message"] == (
            "this conversation used read_file, which the gateway's configuration no longer "
            "offers; your message was not sent. Send /new to start a new conversation with "
            "the tools there are now, or ask the operator to restore the toolset. Sending a "
            "message again continues this conversation without it (the model is told it is "
            "unavailable when it calls it)."
        )
        assert [t.user for t in (await gw.view("alice", sid)).turns][-1] == "memory_add 'tea'"

        # Once: the same message sent again is answered, and so is every later one.
        r = await c.post(url, json={"text": "what now?"}, headers=auth("alice"))
        assert r.status_code == 200, r.text
        [first] = r.json()["requests"]
        assert first["explanation"]["verdict"] == "declared"
        assert first["declared_break"] == (
            "gateway settings changed: toolsets None/-[] -> None/-['files']"
        )
        # The unused tool of the toolset is gone; the used one stays advertised with the
        # bytes it had (history calls it); nothing else moved.
        kept = ["memory_add", "read_file", "run_shell"]
        assert rig.sim.requests[-1]["tools"] == [before[n] for n in kept]
        r = await c.post(url, json={"text": "read_file 'b.md'"}, headers=auth("alice"))
        assert r.status_code == 200
        assert r.json()["text"] == "Done. Tool results: " + _error_text("read_file")[:120]
        assert {q["explanation"]["verdict"] for q in r.json()["requests"]} == {"hit"}

        # Another process (nothing cached) finds nothing to report either.
        replica = _replica(rig, store, make_registry())
        reply = await replica.send("alice", sid, "hello from the replica")
        assert _verdicts([reply]) == [("hit", None)]

        # A second change that drops another used tool is its own notice, once.
        gw.reconfigure(defaults=replace(gw.defaults, disabled_toolsets=("files", "memory")))
        r = await c.post(url, json={"text": "more"}, headers=auth("alice"))
        assert r.status_code == 409
        assert r.json()["error"]["tools"] == ["memory_add"]
        r = await c.post(url, json={"text": "more"}, headers=auth("alice"))
        assert r.status_code == 200
        assert rig.sim.requests[-1]["tools"] == [before[n] for n in kept]


async def test_new_answers_the_409(store: SqlEventStore) -> None:
    rig = make_rig(store)
    gw = rig.gateway
    sid = await gw.create_session("alice")
    await gw.send("alice", sid, "read_file 'a'")
    gw.reconfigure(defaults=replace(gw.defaults, toolsets=("memory",)))
    async with client(rig) as c:
        url = f"/v1/sessions/{sid}/messages"
        r = await c.post(url, json={"text": "hi"}, headers=auth("alice"))
        assert r.status_code == 409
        assert r.json()["error"]["tools"] == ["read_file"]
        r = await c.post(url, json={"text": "/new"}, headers=auth("alice"))
        assert r.status_code == 200
        new = r.json()["new_session_id"]
        r = await c.post(
            f"/v1/sessions/{new}/messages", json={"text": "hello"}, headers=auth("alice")
        )
        assert r.status_code == 200
        assert [t["name"] for t in rig.sim.requests[-1]["tools"]] == ["memory_add"]


# -- any order of outages and returns ------------------------------------------------------

OPS = st.lists(
    st.sampled_from(["down files", "up files", "down shell", "up shell", "replica", "send"]),
    min_size=1,
    max_size=12,
)
PROMPTS = ["read_file 'a'", "run_shell 'ls'", "list_files 'b'", "hello", "memory_add 'x'"]


async def _sequence(tmp: Path, ops: list[str]) -> None:
    calls: list[str] = []
    async with SQLiteStore(tmp / "outage.db") as store:
        rig = make_rig(store, registry=make_registry(calls))
        gw = rig.gateway
        sid = await gw.create_session("alice")
        await gw.send("alice", sid, "read_file 'first'")
        await gw.send("alice", sid, "run_shell 'first'")
        before = _wire(rig.sim.requests[-1])
        full = make_registry(calls)
        registry = gw.pool.registry
        assert registry is not None
        for i, op in enumerate(ops):
            if op.startswith(("down", "up")):
                verb, name = op.split()
                if verb == "down" and name in registry:
                    registry.unregister(name)
                elif verb == "up" and name not in registry:
                    registry.register(full.get(name))
                continue
            if op == "replica":  # a process that has only what this one has now
                gw = _replica(rig, store, ToolRegistry(list(registry)))
                registry = gw.pool.registry
                assert registry is not None
                continue
            prompt = PROMPTS[i % len(PROMPTS)]
            ran = len(calls)
            reply = await gw.send("alice", sid, prompt)
            assert _wire(rig.sim.requests[-1]) == before
            assert {v for v in _verdicts([reply])} == {("hit", None)}
            name = prompt.split()[0]
            if name == "hello":
                assert reply.text == "Understood: hello"
            elif any(name in t.names for t in registry):  # up: it runs
                assert calls[ran:] == [name]
            else:  # down: the model is told, and answers
                assert calls[ran:] == []
                assert reply.text == "Done. Tool results: " + _error_text(name)[:120]


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_any_order_of_outages_and_returns_keeps_answering_on_the_same_prefix(
    tmp_path_factory: Any, ops: list[str]
) -> None:
    asyncio.run(_sequence(tmp_path_factory.mktemp("outage"), ops))
