"""Commands as messages and as endpoints: what each one evicts and where it continues."""

from __future__ import annotations

import pytest

from stoker.errors import StokerError
from stoker.store.base import SqlEventStore
from tests.test_gateway_support import answered, auth, client, make_rig


@pytest.mark.parametrize("command", ["/new", "/reset", "/clear", "/model claude-sonnet-4-5"])
async def test_session_commands_evict_the_cached_agent(store: SqlEventStore, command: str) -> None:
    rig, sid, entry = await answered(store, model="claude-sonnet-4-6")
    gw = rig.gateway
    reply = await gw.send("alice", sid, command)
    assert sid not in gw.agents
    assert reply.kind == "command"
    if command == "/model claude-sonnet-4-5":
        assert reply.new_session_id is None
        answer = await gw.send("alice", sid, "on the new model")
        assert gw.agents.peek(sid) is not entry
        record = answer.requests[0]
        assert record["model"] == "claude-sonnet-4-5"
        assert record["explanation"]["verdict"] == "declared"
        view = await gw.view("alice", sid)
        assert [t.user for t in view.turns] == ["hello", "on the new model"]
        return
    new = reply.new_session_id
    assert new is not None
    assert new != sid
    assert new in gw.agents
    fresh = await gw.view("alice", new)
    assert fresh.turns == ()  # a new lineage: empty history
    old = await gw.view("alice", sid)
    assert [t.user for t in old.turns] == ["hello"]  # the old session is kept, not wiped


async def test_clear_keeps_the_sessions_choices_and_new_takes_the_defaults(
    store: SqlEventStore,
) -> None:
    gw = make_rig(store).gateway
    sid = await gw.create_session("alice", {"model": "claude-sonnet-4-5", "effort": "high"})
    cleared = (await gw.send("alice", sid, "/clear")).new_session_id
    renewed = (await gw.send("alice", sid, "/new")).new_session_id
    assert cleared is not None
    assert renewed is not None
    kept = gw.agents.peek(cleared)
    default = gw.agents.peek(renewed)
    assert kept is not None
    assert default is not None
    assert kept.session.prefix.params.model == "claude-sonnet-4-5"
    assert kept.session.prefix.params.effort == "high"
    assert default.session.prefix.params.model == gw.defaults.model
    assert default.session.prefix.params.effort is None


async def test_compress_compacts_now_and_the_next_message_is_a_declared_break(
    store: SqlEventStore,
) -> None:
    gw = make_rig(store).gateway
    sid = await gw.create_session("alice")
    await gw.send("alice", sid, "hello")
    with pytest.raises(StokerError, match="nothing to compact"):
        await gw.send("alice", sid, "/compress")  # one turn: nothing earlier to summarise
    await gw.send("alice", sid, "more")
    await gw.send("alice", sid, "and more")
    reply = await gw.send("alice", sid, "/compress")
    assert reply.data == {"messages_before": 6, "messages_after": 4}
    answer = await gw.send("alice", sid, "again")
    first = answer.requests[0]
    assert first["declared_break"] == "compaction: /compress"
    assert first["explanation"]["verdict"] == "declared"
    view = await gw.view("alice", sid)
    assert view.turns[-1].user == "again"
    later = await gw.send("alice", sid, "and again")
    assert later.requests[0]["explanation"]["verdict"] == "hit"


async def test_usage_command_reports_every_request(store: SqlEventStore) -> None:
    gw = make_rig(store).gateway
    sid = await gw.create_session("alice")
    await gw.send("alice", sid, "read_file 'a.md'")
    reply = await gw.send("alice", sid, "/usage")
    assert reply.data is not None
    assert [r["explanation"]["verdict"] for r in reply.data["requests"]] == ["first", "hit"]
    assert reply.text.startswith("2 requests, $")


async def test_bad_commands_are_clear_errors_and_a_double_slash_is_text(
    store: SqlEventStore,
) -> None:
    gw = make_rig(store).gateway
    sid = await gw.create_session("alice")
    with pytest.raises(StokerError, match="unknown command /frobnicate"):
        await gw.send("alice", sid, "/frobnicate")
    with pytest.raises(StokerError, match="unknown model"):
        await gw.send("alice", sid, "/model no-such-model")
    with pytest.raises(StokerError, match="reasoning level"):
        await gw.send("alice", sid, "/reasoning 11!")
    # (words about no tool: "a file" would have the demo model list the files)
    reply = await gw.send("alice", sid, "//etc/hosts is missing")
    assert reply.text == "Understood: /etc/hosts is missing"


async def test_commands_have_their_own_endpoint(store: SqlEventStore) -> None:
    rig = make_rig(store)
    async with client(rig) as c:
        sid = (await c.post("/v1/sessions", json={}, headers=auth("alice"))).json()["id"]
        r = await c.post(
            f"/v1/sessions/{sid}/commands/reasoning",
            json={"argument": "low"},
            headers=auth("alice"),
        )
        assert r.status_code == 200
        assert r.json()["command"] == "reasoning"
        entry = rig.gateway.agents.peek(sid)
        assert entry is not None
        assert entry.session.prefix.params.effort == "low"
        r = await c.post(f"/v1/sessions/{sid}/commands/help", headers=auth("alice"))
        assert "/compress" in r.json()["text"]
        r = await c.post(f"/v1/sessions/{sid}/commands/nope", headers=auth("alice"))
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "invalid_request"
