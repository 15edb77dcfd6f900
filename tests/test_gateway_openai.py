"""The OpenAI-compatible endpoints over ASGI, on both stores: a resent history continues
its session, `/v1/responses` (plain, streamed, `previous_response_id`), usage with the
cache, client tools refused, and every error in OpenAI's shape."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.gateway.openai_history import Conversation, Said
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.store.base import SqlEventStore
from stoker.wire.request import Request
from tests.test_gateway_support import FailsOnce, auth, client, make_rig, sse_events

CHAT = "/v1/chat/completions"
# The history a client holds after its first message "first", plus its second message.
RESENT = [
    {"role": "user", "content": "first"},
    {"role": "assistant", "content": "Understood: first"},
    {"role": "user", "content": "second"},
]


async def _chat(
    c: httpx.AsyncClient, messages: list[dict[str, Any]], *, user: str = "alice"
) -> httpx.Response:
    return await c.post(CHAT, json={"model": "stoker", "messages": messages}, headers=auth(user))


async def _first(c: httpx.AsyncClient) -> str:
    """The session a chat of one message ("first") went to."""
    return (await _chat(c, RESENT[:1])).headers["x-stoker-session"]


async def _turns(c: httpx.AsyncClient, sid: str, user: str = "alice") -> list[tuple[str, str]]:
    r = await c.get(f"/v1/sessions/{sid}", headers=auth(user))
    return [(t["user"], t["answer"]) for t in r.json()["turns"]]


async def _sessions(c: httpx.AsyncClient, user: str = "alice") -> list[str]:
    r = await c.get("/v1/sessions", headers=auth(user))
    return [s["id"] for s in r.json()["sessions"]]


def openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
    """The error object of `r`, checked to be OpenAI's shape with `status`."""
    assert r.status_code == status, r.text[:300]
    body = r.json()
    assert set(body) == {"error"}
    error = dict(body["error"])
    assert {"message", "type", "param", "code"} <= set(error)
    assert error["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    return error


async def test_a_resent_history_without_a_header_continues_one_session(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        # A framework: its system prompt carries the time, and it resends everything.
        history: list[dict[str, Any]] = []
        sids, cached = set(), []
        for i, text in enumerate(["first", "second", "third"]):
            system = [{"role": "system", "content": f"It is 12:00:0{i} now."}]
            history.append({"role": "user", "content": text})
            r = await _chat(c, system + history)
            assert r.status_code == 200, r.text
            sids.add(r.headers["x-stoker-session"])
            cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
            answer = r.json()["choices"][0]["message"]["content"]
            # Content as a list of parts is the same message as the string.
            history.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        (sid,) = sids
        assert await _sessions(c) == [sid]
        assert await _turns(c, sid) == [
            (t, f"Understood: {t}") for t in ("first", "second", "third")
        ]
        assert cached[0] == 0
        assert all(n > 0 for n in cached[1:])


async def test_an_edited_history_starts_a_new_session_and_leaves_the_old_one(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        old = await _first(c)
        edited = [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "Understood: first, edited by the client"},
            {"role": "user", "content": "second"},
        ]
        r = await _chat(c, edited)
        new = r.headers["x-stoker-session"]
        assert new != old
        assert await _turns(c, old) == [("first", "Understood: first")]
        assert await _turns(c, new) == [("second", "Understood: second")]


async def test_a_message_sent_another_way_makes_the_resent_history_stale(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        sid = await _first(c)
        await c.post(f"/v1/sessions/{sid}/messages", json={"text": "aside"}, headers=auth("alice"))
        r = await _chat(c, RESENT)
        assert r.headers["x-stoker-session"] != sid  # the client never saw "aside"
        assert [u for u, _ in await _turns(c, sid)] == ["first", "aside"]


async def test_a_message_the_provider_failed_is_resent_into_the_same_session(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    failing = rig.provider = FailsOnce(rig.sim, status=503, armed=False)
    async with client(rig) as c:
        sid = await _first(c)
        failing.armed = True
        error = openai_error(await _chat(c, RESENT), 502)
        assert error["code"] == "provider_error"
        r = await _chat(c, RESENT)  # the client's retry: the same history, the same message
        assert r.status_code == 200, r.text
        assert r.headers["x-stoker-session"] == sid
        assert await _sessions(c) == [sid]
        cut_off = "(the previous message got no answer: its turn was cut off.)"
        answer = r.json()["choices"][0]["message"]["content"]
        assert answer == f"Understood: second\n{cut_off}"
        assert await _turns(c, sid) == [
            ("first", "Understood: first"),
            ("second", ""),  # the failed try, kept: the session says what happened
            ("second", answer),
        ]
        later = [*RESENT, {"role": "assistant", "content": answer}]
        r = await _chat(c, [*later, {"role": "user", "content": "third"}])
        assert r.headers["x-stoker-session"] == sid


async def test_the_answer_its_response_and_the_clients_history_are_one_transaction(
    store: SqlEventStore,
) -> None:
    """A message with an idempotency key on the chat endpoint writes twice: its user
    message before the provider call, then the answer with the key's response and where
    the client's conversation stands (they were three transactions after the answer)."""
    async with client(make_rig(store)) as c:
        sid = await _first(c)
        writes: list[int] = []
        write = store._write  # noqa: SLF001 (counting the transactions a message costs)

        async def counted(ops: Any) -> None:
            writes.append(len(ops))
            await write(ops)

        store._write = counted  # type: ignore[method-assign]  # noqa: SLF001
        headers = {**auth("alice"), "Idempotency-Key": "second-1"}
        body = {"model": "stoker", "messages": RESENT}
        r = await c.post(CHAT, json=body, headers=headers)
        assert r.status_code == 200, r.text
        assert len(writes) == 2
        store._write = write  # type: ignore[method-assign]  # noqa: SLF001
        # all of it is there: the key's response, and the history that finds the session
        saved = await store.idempotent_response(sid, "second-1")
        assert saved is not None
        assert json.loads(saved)["text"] == r.json()["choices"][0]["message"]["content"]
        third = [
            *RESENT,
            {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]},
        ]
        r = await _chat(c, [*third, {"role": "user", "content": "third"}])
        assert r.headers["x-stoker-session"] == sid
        assert [u for u, _ in await _turns(c, sid)] == ["first", "second", "third"]


async def test_another_users_identical_history_never_reaches_the_session(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        alice = await _first(c)
        r = await _chat(c, RESENT, user="bob")
        assert r.status_code == 200
        assert r.headers["x-stoker-session"] != alice
        assert await _turns(c, alice) == [("first", "Understood: first")]


async def test_usage_reports_the_cache_in_openai_names_and_the_ttls_in_x_stoker(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        first = (await _chat(c, RESENT[:1])).json()
        r = await _chat(c, RESENT)
        sid = r.headers["x-stoker-session"]
        recorded = (await c.get(f"/v1/sessions/{sid}/usage", headers=auth("alice"))).json()
    calls = [q["usage"] for q in recorded["requests"]]
    for body, u in zip((first, r.json()), calls, strict=True):
        usage = body["usage"]
        assert usage["prompt_tokens"] == u["input_total"]
        assert usage["prompt_tokens_details"] == {
            "cached_tokens": u["read"],
            "cache_write_tokens": u["written"],
        }
        assert usage["x_stoker"]["cache_write_5m_tokens"] == u["written_5m"]
        assert usage["x_stoker"]["cache_write_1h_tokens"] == u["written_1h"]
        assert usage["x_stoker"]["uncached_tokens"] == u["uncached"]
    assert calls[0]["written"] > 0
    assert calls[1]["read"] >= calls[0]["written"]


async def test_responses_answers_continues_by_id_and_by_history(store: SqlEventStore) -> None:
    async with client(make_rig(store)) as c:
        body = {"model": "stoker", "instructions": "ignored", "input": "first"}
        r = await c.post("/v1/responses", json=body, headers=auth("alice"))
        first = r.json()
        sid = r.headers["x-stoker-session"]
        assert first["object"] == "response"
        assert first["status"] == "completed"
        [item] = first["output"]
        assert (item["type"], item["role"]) == ("message", "assistant")
        assert item["content"][0]["text"] == "Understood: first"
        by_id = {
            "input": [{"role": "user", "content": "second"}],
            "previous_response_id": first["id"],
        }
        r = await c.post("/v1/responses", json=by_id, headers=auth("alice"))
        assert r.headers["x-stoker-session"] == sid
        assert r.json()["usage"]["input_tokens_details"]["cached_tokens"] > 0
        # The whole history resent, as Responses items, continues the same session.
        history = [
            {"role": "user", "content": "first"},
            {"type": "message", "role": "assistant", "id": item["id"], "content": item["content"]},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
            {"type": "message", "role": "assistant", "content": "Understood: second"},
            {"role": "user", "content": "third"},
        ]
        r = await c.post("/v1/responses", json={"input": history}, headers=auth("alice"))
        assert r.headers["x-stoker-session"] == sid
        assert [u for u, _ in await _turns(c, sid)] == ["first", "second", "third"]
        # An answer the conversation went past cannot be continued from.
        r = await c.post("/v1/responses", json=by_id, headers=auth("alice"))
        error = openai_error(r, 400)
        assert (error["param"], error["code"]) == (
            "previous_response_id",
            "previous_response_not_found",
        )
        r = await c.post("/v1/responses", json=by_id, headers=auth("bob"))
        assert openai_error(r, 400)["param"] == "previous_response_id"  # not bob's
        assert [u for u, _ in await _turns(c, sid)] == ["first", "second", "third"]


async def test_a_streamed_response_is_the_responses_event_sequence(store: SqlEventStore) -> None:
    async with client(make_rig(store)) as c:
        body = {"input": "stream me", "stream": True}
        r = await c.post("/v1/responses", json=body, headers=auth("alice"))
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [(e, json.loads(d)) for e, d in sse_events(r.text)]
    kinds = [e for e, _ in events]
    assert [d["type"] for _, d in events] == kinds
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    deltas = kinds.count("response.output_text.delta")
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    text = "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
    assert text == "Understood: stream me"
    final = events[-1][1]["response"]
    assert final["output"][0]["content"][0]["text"] == text
    assert final["usage"]["output_tokens"] > 0
    assert events[0][1]["response"]["id"] == final["id"]


async def test_client_tools_are_refused_with_a_400_and_nothing_is_stored(
    store: SqlEventStore,
) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    user = {"role": "user", "content": "hi"}
    refused = [
        (CHAT, {"messages": [user], "tools": [tool]}, "tools"),
        (CHAT, {"messages": [user], "functions": [tool["function"]]}, "functions"),
        (
            CHAT,
            {
                "messages": [
                    user,
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
                ]
            },
            "messages[1]",
        ),
        (
            "/v1/responses",
            {"input": "hi", "tools": [{"type": "function", "name": "lookup"}]},
            "tools",
        ),
        (
            "/v1/responses",
            {"input": [user, {"type": "function_call_output", "call_id": "c", "output": "42"}]},
            "input[1]",
        ),
    ]
    async with client(make_rig(store)) as c:
        for path, body, param in refused:
            error = openai_error(await c.post(path, json=body, headers=auth("alice")), 400)
            assert (error["param"], error["code"]) == (param, "client_tools_unsupported")
            assert "tool" in error["message"]
        assert await _sessions(c) == []


async def test_errors_are_in_openais_shape_with_the_gateways_type_as_code(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store), max_body_bytes=4096) as c:
        user = [{"role": "user", "content": "hi"}]
        r = await c.post(CHAT, json={"messages": user}, headers={"Authorization": "Bearer nope"})
        assert openai_error(r, 401)["code"] == "invalid_api_key"
        assert r.headers["www-authenticate"] == "Bearer"
        r = await c.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert openai_error(r, 401)["code"] == "invalid_api_key"
        r = await c.post(CHAT, json={"messages": []}, headers=auth("alice"))
        assert "messages" in openai_error(r, 400)["message"]
        r = await c.post(CHAT, content=b"{nope", headers=auth("alice"))
        assert "not JSON" in openai_error(r, 400)["message"]
        r = await c.post(
            "/v1/responses",
            json={"input": [{"role": "assistant", "content": "x"}]},
            headers=auth("alice"),
        )
        assert openai_error(r, 400)["param"] == "input"
        r = await c.post(
            "/v1/responses",
            json={"input": [{"type": "reasoning", "summary": []}]},
            headers=auth("alice"),
        )
        assert openai_error(r, 400)["param"] == "input[0].type"
        schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": "object"}}
        r = await c.post(
            CHAT, json={"messages": user, "response_format": schema}, headers=auth("alice")
        )
        assert openai_error(r, 400)["param"] == "response_format.json_schema.schema"
        not_a_schema = {"type": "json_schema", "json_schema": {"schema": {"type": 5}}}
        r = await c.post(
            CHAT, json={"messages": user, "response_format": not_a_schema}, headers=auth("alice")
        )
        assert openai_error(r, 400)["code"] == "invalid_json_schema"
        r = await c.post(CHAT, json={"messages": user, "n": 2}, headers=auth("alice"))
        assert openai_error(r, 400)["param"] == "n"
        as_yaml = {"input": "hi", "text": {"format": {"type": "yaml"}}}
        r = await c.post("/v1/responses", json=as_yaml, headers=auth("alice"))
        assert openai_error(r, 400)["param"] == "text.format.type"
        r = await c.post(CHAT, json={"messages": user, "pad": "x" * 5000}, headers=auth("alice"))
        assert openai_error(r, 413)["code"] == "request_too_large"
        r = await c.post(
            "/v1/responses",
            content=b"input=hi",
            headers={**auth("alice"), "Content-Type": "text/plain"},
        )
        assert openai_error(r, 415)["code"] == "unsupported_media_type"
        r = await c.post(
            CHAT, json={"messages": user}, headers={**auth("alice"), "X-Stoker-Session": "x" * 32}
        )
        assert openai_error(r, 404)["code"] == "not_found"
        r = await c.put("/v1/responses", json={}, headers=auth("alice"))
        assert openai_error(r, 405)["code"] == "method_not_allowed"
        assert r.headers["allow"] == "POST"
        assert await _sessions(c) == []


class _Broken(ProviderWrapper):
    """The simulator with a bug: every call raises what no handler expects."""

    async def complete(self, request: Request, context: CallContext) -> Completion:
        raise RuntimeError("a bug")


async def test_a_failed_requests_log_line_names_the_request_id_its_client_got(
    store: SqlEventStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rig = make_rig(store)
    rig.provider = _Broken(rig.sim)
    user = [{"role": "user", "content": "hi"}]
    async with client(rig) as c:
        plain = await _chat(c, user)
        streamed = await c.post(
            CHAT, json={"messages": user, "stream": True}, headers=auth("alice")
        )
    assert openai_error(plain, 500)["code"] == "internal"
    assert json.loads(sse_events(streamed.text)[-2][1])["error"]["code"] == "internal"
    for r in (plain, streamed):
        rid = r.headers["x-request-id"]
        assert [m for m in caplog.messages if rid in m], rid
    assert plain.headers["x-request-id"] != streamed.headers["x-request-id"]


# -- the hash chain, by generation -------------------------------------------------------------

_text = st.text(max_size=20)
_said = st.builds(Said, role=st.sampled_from(["user", "assistant"]), text=_text)


@given(history=st.lists(_said, min_size=1, max_size=8), new=st.lists(_text, min_size=1, max_size=3))
def test_a_history_resent_with_new_messages_finds_where_it_was_answered(
    history: list[Said], new: list[str]
) -> None:
    """What the gateway stores after an answer is what the next request looks up, however
    many user messages the client adds; and no other history has that hash."""
    *before, last = history
    answered = Conversation(messages=(*tuple(before), Said(role="user", text=last.text)))
    stored = answered.after("the answer")
    resent = Conversation(
        messages=(
            *answered.messages,
            Said(role="assistant", text="the answer"),
            *(Said(role="user", text=t) for t in new),
        )
    )
    assert resent.known == stored
    assert resent.new_text("messages") == "\n\n".join(new)
    assert answered.after("another answer") != stored


@given(history=st.lists(_said, min_size=2, max_size=8), data=st.data())
def test_any_edit_of_an_earlier_message_changes_the_hash(
    history: list[Said], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(history) - 1))
    old = history[at]
    edited = Said(
        role=data.draw(st.sampled_from(["user", "assistant"])),
        text=data.draw(_text.filter(lambda t: t != old.text)),
    )
    a = Conversation(messages=tuple(history))
    b = Conversation(messages=(*tuple(history[:at]), edited, *tuple(history[at + 1 :])))
    assert a.after("x") != b.after("x")
