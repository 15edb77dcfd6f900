"""Store contract: every backend keeps events exactly, acknowledges them durably,
indexes used tools, migrates, and resumes sessions by the rules."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import replace

import pytest

from stoker.errors import MissingTools, ResumeMismatch, SessionNotFound, StoreError
from stoker.providers.sim.model import Call, RuleModel, ScriptedModel
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.schema import LATEST
from stoker.tools import Toolset, tool
from stoker.wire.blocks import TextBlock
from stoker.wire.events import MessageAppended, SessionCreated
from stoker.wire.messages import AssistantMessage, user_text
from stoker.wire.prefix import CacheParams, Prefix
from tests.helpers import make_registry, sim_agent
from tests.store_fixtures import reopen


@tool
def extra_tool(text: str) -> str:
    """A tool the runtime adds after the session was created.

    Args:
        text: Anything.
    """
    return text


async def _session_with_history(store: SqlEventStore, **agent_kwargs):  # type: ignore[no-untyped-def]
    model = ScriptedModel(
        [Call(name="read_file", arguments={"text": "a.md"}), "read it", "ok"], then=RuleModel()
    )
    agent, provider = sim_agent(model=model, registry=make_registry(), **agent_kwargs)
    session = agent.session(store=store)
    await session.send("read a.md")
    await session.send("thanks")
    return agent, provider, session


async def test_events_round_trip_exactly(store: SqlEventStore) -> None:
    agent, _, session = await _session_with_history(store)
    stored = await store.load(session.id)
    assert stored.messages == session.history
    assert stored.prefix.to_json() == session.prefix.to_json()
    assert stored.used_tools == frozenset({"read_file"})
    assert stored.last_record == session.records[-1]
    assert stored.config["agent_name"] == agent.name
    seqs = [seq for seq, *_ in await store.events(session.id)]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_resume_in_a_new_store_object_sends_identical_prefix_and_reads_it(
    store: SqlEventStore,
) -> None:
    agent, provider, session = await _session_with_history(store)
    last_sent = provider.requests[-1]
    previous = session.records[-1].usage
    again = reopen(store)
    try:
        # A fresh agent object built the same way (same provider: its cache outlives us).
        runtime = type(agent)(
            **{f.name: getattr(agent, f.name) for f in dataclasses.fields(agent) if f.init}
        )
        resumed = await runtime.open(again, session.id, create=False)
        result = await resumed.send("one more")
    finally:
        await again.close()
    first = provider.requests[len(provider.requests) - len(result.records)]
    assert json.dumps(first["tools"]) == json.dumps(last_sent["tools"])
    assert first["system"] == last_sent["system"]
    assert result.records[0].usage.read == previous.read + previous.written
    assert result.records[0].explanation.verdict == "hit"


async def test_adding_a_tool_on_resume_is_allowed_and_does_not_change_tools(
    store: SqlEventStore,
) -> None:
    agent, provider, session = await _session_with_history(store)
    before = provider.requests[-1]["tools"]
    wider, _ = sim_agent(registry=make_registry(), tools=[extra_tool])
    resumed = await wider.open(store, session.id, create=False)
    assert resumed.prefix == session.prefix
    assert "extra_tool" not in resumed.prefix.tool_names
    await resumed.adopt(replace(wider, provider=agent.provider))  # the sim holding the cache
    await resumed.send("hello")
    assert provider.requests[-1]["tools"] == before


async def test_removing_an_unused_tool_on_resume_is_allowed(store: SqlEventStore) -> None:
    _, _, session = await _session_with_history(store)
    narrower, _ = sim_agent(registry=make_registry(), disabled_toolsets=("shell",))
    with pytest.raises(ResumeMismatch, match="disabled_toolsets"):
        await narrower.open(store, session.id, create=False)
    registry = make_registry()
    registry.unregister("shell")
    same_config, _ = sim_agent(registry=registry)
    resumed = await same_config.open(store, session.id, create=False)
    assert resumed.prefix == session.prefix
    assert "run_shell" in resumed.prefix.tool_names  # still sent: removing it would break


async def test_removing_a_used_tool_fails_listing_it(store: SqlEventStore) -> None:
    # A tool the agent defines itself; one from a registry toolset that is not registered
    # is an outage instead (tests/test_toolset_outage.py).
    model = ScriptedModel([Call(name="extra_tool", arguments={"text": "x"}), "done"])
    agent, _ = sim_agent(model=model, registry=make_registry(), tools=[extra_tool])
    session = agent.session(store=store)
    await session.send("use the extra tool")
    without, _ = sim_agent(registry=make_registry())
    with pytest.raises(MissingTools, match="extra_tool") as info:
        await without.open(store, session.id, create=False)
    assert info.value.names == ["extra_tool"]


async def test_changed_model_fails_listing_old_and_new(store: SqlEventStore) -> None:
    _, _, session = await _session_with_history(store)
    agent, _ = sim_agent(registry=make_registry(), llm="claude-opus-4-6", effort="high")
    with pytest.raises(ResumeMismatch) as info:
        await agent.open(store, session.id, create=False)
    assert info.value.diffs == [
        ("model", "claude-sonnet-4-6", "claude-opus-4-6"),
        ("effort", None, "high"),
    ]
    assert "model: stored 'claude-sonnet-4-6', runtime 'claude-opus-4-6'" in str(info.value)


async def test_tools_reconcile_records_a_rebase_event_with_its_reason(store: SqlEventStore) -> None:
    agent, provider, session = await _session_with_history(store)
    wider, _ = sim_agent(registry=make_registry(), tools=[extra_tool])
    wider = type(wider)(
        **{
            **{f.name: getattr(wider, f.name) for f in dataclasses.fields(wider) if f.init},
            "provider": agent.provider,
        }
    )
    resumed = await wider.open(store, session.id, create=False, tools="reconcile")
    assert "extra_tool" in resumed.prefix.tool_names
    rebased = [
        json.loads(body)
        for _, kind, _, body in await store.events(session.id)
        if kind == "prefix_rebased"
    ]
    assert len(rebased) == 1
    assert rebased[0]["reason"] == "tools reconciled on resume: added ['extra_tool'], removed []"
    assert rebased[0]["estimated_rewrite_tokens"] > 1000
    result = await resumed.send("hello")
    assert result.records[0].explanation.verdict == "declared"
    assert "extra_tool" in [t["name"] for t in provider.requests[-1]["tools"]]
    assert (await store.load(session.id)).prefix == resumed.prefix


async def test_rebase_is_the_only_way_to_change_the_prefix(store: SqlEventStore) -> None:
    _, provider, session = await _session_with_history(store)
    await session.rebase(reason="switch model for a hard task", model="claude-opus-4-6")
    result = await session.send("hard question")
    assert provider.requests[-1]["model"] == "claude-opus-4-6"
    assert (result.records[0].explanation.verdict, result.records[0].declared_break) == (
        "declared",
        "switch model for a hard task",
    )
    stored = await store.load(session.id)
    assert stored.prefix.params.model == "claude-opus-4-6"
    assert stored.config["model"] == "claude-opus-4-6"


async def test_branch_shares_history_and_reads_the_parents_cache(store: SqlEventStore) -> None:
    _, _, session = await _session_with_history(store)
    branch = session.branch(at=4)
    result = await branch.send("a different follow-up")
    assert branch.history[:4] == session.history[:4]
    assert result.records[0].usage.read > 1000
    stored = await store.load(branch.id)
    assert (stored.role, stored.parent_id, len(stored.messages)) == ("branch", session.id, 6)


async def test_resume_of_a_10000_event_session_does_not_read_the_log_for_tools(
    store: SqlEventStore,
) -> None:
    counts = []
    for n_events in (100, 10_000):
        agent, _ = sim_agent(registry=make_registry())
        sid = f"big-{n_events}"
        prefix = agent.build_prefix()
        events = [
            SessionCreated(
                session_id=sid, prefix=prefix, config={**agent.config_snapshot(), "root_id": sid}
            )
        ]
        for i in range(n_events - 1):
            m = (
                user_text(f"q{i}")
                if i % 2 == 0
                else AssistantMessage(content=(TextBlock(text=f"a{i}"),))
            )
            events.append(MessageAppended(session_id=sid, index=i, message=m))
        await store.emit_many(events)
        spy = reopen(store, trace=True)
        try:
            resumed = await agent.open(spy, sid, create=False)
            counts.append(spy.stats.queries)
            reads = [s for s in spy.stats.statements if "FROM events" in s]
        finally:
            await spy.close()
        assert len(resumed.history) == n_events - 1
        # the only read of the log is the history replay itself; tools come from the index
        assert reads == [
            "SELECT type, body FROM events WHERE session_id = ? "
            "AND type IN ('message_appended', 'history_compacted') ORDER BY seq"
        ]
    assert counts[0] == counts[1]


async def test_unknown_session_is_a_clear_error(store: SqlEventStore) -> None:
    agent, _ = sim_agent(registry=make_registry())
    with pytest.raises(SessionNotFound, match="stoker sessions list"):
        await agent.open(store, "nope", create=False)


async def test_list_and_delete_include_child_lineages(store: SqlEventStore) -> None:
    _, _, session = await _session_with_history(store)
    fork = session.fork()
    await fork.send("review")
    listed = {s.id: s for s in await store.list_sessions()}
    assert set(listed) == {session.id, fork.id}
    assert listed[session.id].title == "read a.md"
    assert listed[fork.id].parent_id == session.id
    assert await store.delete(session.id) is True
    assert await store.list_sessions() == []
    assert await store.delete(session.id) is False


async def test_schema_version_is_recorded_and_a_newer_database_is_refused(
    store: SqlEventStore,
) -> None:
    assert await store.schema_version() == LATEST
    await store._write(  # noqa: SLF001 - plants a newer schema version
        [
            (
                "INSERT INTO stoker_schema (version, name, applied_at) VALUES (?, ?, ?)",
                (LATEST + 1, "future", 0.0),
            )
        ]
    )
    again = reopen(store)
    try:
        with pytest.raises(
            StoreError, match=f"schema version {LATEST + 1}, newer than this Stoker"
        ):
            await again.list_sessions()
    finally:
        await again.close()


async def test_a_second_prefix_cannot_hide_in_the_store(store: SqlEventStore) -> None:
    """The stored prefix is the one sent: byte-identical JSON, not a re-derivation."""
    odd = Prefix(
        params=CacheParams(model="claude-sonnet-4-6"), system="  spaces  \n\ttabs\u00e9", tools=()
    )
    await store.emit(SessionCreated(session_id="odd", prefix=odd, config={}))
    assert (await store.load("odd")).prefix.to_json() == odd.to_json()


async def test_toolset_registry_change_keeps_stored_bytes(store: SqlEventStore) -> None:
    _, _, session = await _session_with_history(store)
    registry = make_registry()
    registry.register(Toolset(name="extra", tools=[extra_tool]))
    agent, _ = sim_agent(registry=registry)
    resumed = await agent.open(store, session.id, create=False)
    assert resumed.prefix.tools == session.prefix.tools


async def test_sessions_list_by_owner(store: SqlEventStore) -> None:
    agent, _ = sim_agent(registry=make_registry())
    for sid, owner in (("a", "alice"), ("b", "bob"), ("c", "alice")):
        config = {**agent.config_snapshot(), "root_id": sid, "owner": owner}
        await store.emit(SessionCreated(session_id=sid, prefix=agent.build_prefix(), config=config))
    assert {s.id for s in await store.list_sessions(owner="alice")} == {"a", "c"}
    assert await store.owner("b") == "bob"


async def test_idempotency_keys_return_the_first_response(store: SqlEventStore) -> None:
    agent, _ = sim_agent(registry=make_registry())
    await store.emit(SessionCreated(session_id="s", prefix=agent.build_prefix(), config={}))
    assert await store.idempotent_response("s", "k1") is None
    await store.remember_response("s", "k1", '{"text": "first"}')
    await store.remember_response("s", "k1", '{"text": "second"}')
    assert await store.idempotent_response("s", "k1") == '{"text": "first"}'


async def test_session_lock_serializes_across_store_objects(store: SqlEventStore) -> None:
    """Two replicas (two store objects) never hold one session's lock at once (PostgreSQL
    advisory lock); one process serializes with its in-process lock (both backends)."""
    await store.list_sessions()
    other = reopen(store) if isinstance(store, PostgresStore) else store
    order: list[str] = []
    try:
        async with store.session_lock("s"):
            waiter = asyncio.create_task(_hold(other, order))
            await asyncio.sleep(0.1)
            order.append("first released")
        await waiter
    finally:
        if other is not store:
            await other.close()
    assert order == ["first released", "second acquired"]


async def _hold(store: SqlEventStore, order: list[str]) -> None:
    async with store.session_lock("s"):
        order.append("second acquired")


async def test_concurrent_first_writes_wait_for_the_one_migration(store: SqlEventStore) -> None:
    fresh = reopen(store)
    agent, _ = sim_agent(registry=make_registry())
    try:
        await asyncio.gather(
            *(
                fresh.emit(
                    SessionCreated(session_id=f"c{i}", prefix=agent.build_prefix(), config={})
                )
                for i in range(5)
            )
        )
        assert len(await fresh.list_sessions()) == 5
        assert await fresh.head("c0") == (None, 1)
    finally:
        await fresh.close()


async def test_a_declared_break_survives_a_restart(store: SqlEventStore) -> None:
    agent, provider, session = await _session_with_history(store)
    await session.rebase(reason="new system prompt for the next phase", system="Be terse.")
    # the process stops here, before the next call; another one resumes the session
    resumed = await agent.open(store, session.id, create=False)
    result = await resumed.send("next phase")
    assert provider.requests[-len(result.records)]["system"][0]["text"] == "Be terse."
    assert result.records[0].explanation.verdict == "declared"
    assert result.records[0].declared_break == "new system prompt for the next phase"
    assert (await store.load(session.id)).declared_break is None


async def test_a_resumed_session_on_a_fresh_simulator_explains_the_cold_cache(
    store: SqlEventStore,
) -> None:
    _, _, session = await _session_with_history(store)
    fresh, _ = sim_agent(registry=make_registry())  # a new simulator: its cache is empty
    resumed = await fresh.open(store, session.id, create=False)
    result = await resumed.send("hello again")
    explanation = result.records[0].explanation
    assert (explanation.verdict, result.records[0].usage.read) == ("cold", 0)
    assert "holds no entry for this prefix" in explanation.detail


async def test_a_stored_turn_reads_back_as_the_result_send_returned(store: SqlEventStore) -> None:
    """What a retry whose response was lost answers with (the gateway replays it)."""
    from stoker.session_views import show_session

    agent, _ = sim_agent(registry=make_registry())
    session = await agent.open(store, "views-1")
    sent = await session.send("read_file 'a.md'")
    again = (await show_session(store, "views-1")).turns[-1].result()
    assert (again.text, again.output, again.exit) == (sent.text, sent.text, "answered")
    assert [r.usage for r in again.records] == [r.usage for r in sent.records]
