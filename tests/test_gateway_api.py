"""The HTTP API over ASGI (no sockets): auth and isolation, limits, errors, streaming,
ordering, idempotent retries, and the published schema."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from starlette.routing import Route

from stoker.gateway.app import create_app
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.wire.request import Request
from tests.test_gateway_support import (
    TOKENS,
    Rig,
    auth,
    client,
    make_rig,
    sse_events,
    tokens,
)


async def _session(c: Any, user: str = "alice") -> str:
    r = await c.post("/v1/sessions", json={}, headers=auth(user))
    assert r.status_code == 201
    return str(r.json()["id"])


async def test_requests_without_a_known_token_are_401_with_a_json_body(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            r = await c.get("/v1/sessions", headers=headers)
            assert r.status_code == 401
            assert r.headers["www-authenticate"] == "Bearer"
            assert r.json()["error"]["type"] == "unauthorized"
            assert "not-a-token" not in r.text


async def test_a_cross_user_read_returns_404(store: SqlEventStore) -> None:
    async with client(make_rig(store)) as c:
        sid = await _session(c, "alice")
        await c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}, headers=auth("alice"))
        missing = (await c.get("/v1/sessions/" + "x" * 32, headers=auth("bob"))).json()
        attempts = [
            c.get(f"/v1/sessions/{sid}", headers=auth("bob")),
            c.get(f"/v1/sessions/{sid}/usage", headers=auth("bob")),
            c.post(f"/v1/sessions/{sid}/messages", json={"text": "x"}, headers=auth("bob")),
            c.post(f"/v1/sessions/{sid}/commands/new", headers=auth("bob")),
            c.delete(f"/v1/sessions/{sid}", headers=auth("bob")),
            c.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "x"}]},
                headers={**auth("bob"), "X-Stoker-Session": sid},
            ),
        ]
        for r in await asyncio.gather(*attempts):
            assert r.status_code == 404
            error = r.json()["error"]
            # The OpenAI-compatible endpoint answers in OpenAI's shape: the type is
            # OpenAI's, the gateway's own is the code.
            kind = error["code"] if "param" in error else error["type"]
            assert kind == missing["error"]["type"] == "not_found"
            assert error["message"] == missing["error"]["message"].replace("x" * 32, sid)
        assert (await c.get("/v1/sessions", headers=auth("bob"))).json()["sessions"] == []
        r = await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))
        assert [t["user"] for t in r.json()["turns"]] == ["hi"]  # untouched


async def test_sessions_are_created_listed_read_and_deleted(store: SqlEventStore) -> None:
    async with client(make_rig(store)) as c:
        sid = await _session(c)
        assert len(sid) >= 32  # unguessable
        r = await c.post(
            f"/v1/sessions/{sid}/messages", json={"text": "read_file 'a.md'"}, headers=auth("alice")
        )
        reply = r.json()
        assert reply["text"] == "Done. Tool results: read_file ok: a.md"
        assert reply["usage"]["output"] > 0
        assert "gateway;dur=" in r.headers["server-timing"]
        listed = (await c.get("/v1/sessions", headers=auth("alice"))).json()["sessions"]
        assert [(s["id"], s["messages"]) for s in listed] == [(sid, 4)]
        usage = (await c.get(f"/v1/sessions/{sid}/usage", headers=auth("alice"))).json()
        assert [q["explanation"]["verdict"] for q in usage["requests"]] == ["first", "hit"]
        assert usage["usage"]["read"] == sum(q["usage"]["read"] for q in usage["requests"])
        assert usage["cost_usd"] > 0
        assert (await c.delete(f"/v1/sessions/{sid}", headers=auth("alice"))).status_code == 204
        assert (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).status_code == 404


async def test_oversized_bodies_and_messages_are_413(store: SqlEventStore) -> None:
    rig = make_rig(store, max_message_chars=100)
    async with client(rig, max_body_bytes=2048) as c:
        sid = await _session(c)
        url = f"/v1/sessions/{sid}/messages"
        r = await c.post(url, json={"text": "x" * 5000}, headers=auth("alice"))
        assert r.status_code == 413
        assert r.json()["error"]["type"] == "payload_too_large"

        async def chunked() -> Any:  # no Content-Length: cut off while reading
            for _ in range(10):
                yield b" " * 1000

        r = await c.post(url, content=chunked(), headers=auth("alice"))
        assert r.status_code == 413
        r = await c.post(url, json={"text": "y" * 101}, headers=auth("alice"))
        assert r.status_code == 413
        assert "limit is 100" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "not JSON"),
        (b"{}", "text: Field required"),
        (b'{"text": "hi", "extra": 1}', "extra: Extra inputs are not permitted"),
        (b'{"text": "   "}', "the message is empty"),
        (b'{"text": "/nope"}', "unknown command /nope"),
        (b'{"text": "/model nonexistent-model"}', "unknown model"),
    ],
)
async def test_bad_input_is_a_400_that_says_what_to_fix(
    store: SqlEventStore, body: bytes, fragment: str
) -> None:
    async with client(make_rig(store)) as c:
        sid = await _session(c)
        r = await c.post(f"/v1/sessions/{sid}/messages", content=body, headers=auth("alice"))
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "invalid_request"
        assert fragment in r.json()["error"]["message"]


async def test_an_idempotency_key_makes_a_retry_return_the_stored_reply(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    async with client(rig) as c:
        sid = await _session(c)
        headers = {**auth("alice"), "Idempotency-Key": "msg-1"}
        url = f"/v1/sessions/{sid}/messages"
        first = await c.post(url, json={"text": "hello"}, headers=headers)
        calls = len(rig.sim.requests)
        again = await c.post(url, json={"text": "hello"}, headers=headers)
        assert len(rig.sim.requests) == calls  # no second turn
        assert again.headers["idempotent-replayed"] == "true"
        assert {**again.json(), "replayed": False} == first.json()
        view = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()
        assert [t["user"] for t in view["turns"]] == ["hello"]


async def test_a_streamed_message_sends_text_tool_status_and_a_final_usage_event(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        sid = await _session(c)
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "read_file 'notes.md'"},
            headers={**auth("alice"), "Accept": "text/event-stream"},
        )
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.text)
        kinds = [e for e, _ in events]
        texts = kinds.count("text")  # the answer streams in pieces
        assert texts >= 2
        assert kinds == ["status", "status", "tool", "tool", "status", *["text"] * texts, "done"]
        tools = [json.loads(d) for e, d in events if e == "tool"]
        assert [(t["name"], t["phase"]) for t in tools] == [
            ("read_file", "start"),
            ("read_file", "end"),
        ]
        done = json.loads(events[-1][1])
        assert done["text"] == "".join(json.loads(d)["delta"] for e, d in events if e == "text")
        assert done["usage"]["input_total"] > 0
        assert len(done["requests"]) == 2
        r = await c.post(  # ?stream=true works too, and a 404 comes before any stream
            "/v1/sessions/" + "z" * 32 + "/messages?stream=true",
            json={"text": "x"},
            headers=auth("alice"),
        )
        assert r.status_code == 404


class _Probe(ProviderWrapper):
    """Counts provider calls in flight; each takes a little time so overlaps can show."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.now, self.peak = 0, 0

    async def complete(self, request: Request, context: CallContext) -> Completion:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(0.01)
            return await self.inner.complete(request, context)
        finally:
            self.now -= 1


def _probed(store: SqlEventStore) -> tuple[Rig, _Probe]:
    rig = make_rig(store)
    probe = _Probe(rig.sim)
    rig.provider = probe
    return rig, probe


async def test_messages_to_one_session_run_one_at_a_time_in_order(store: SqlEventStore) -> None:
    rig, probe = _probed(store)
    async with client(rig) as c:
        sid = await _session(c)
        url = f"/v1/sessions/{sid}/messages"
        texts = [f"message {i}" for i in range(8)]
        replies = await asyncio.gather(
            *(c.post(url, json={"text": t}, headers=auth("alice")) for t in texts)
        )
        assert [r.json()["text"] for r in replies] == [f"Understood: {t}" for t in texts]
        assert probe.peak == 1
        turns = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()["turns"]
        assert [(t["user"], t["answer"]) for t in turns] == [(t, f"Understood: {t}") for t in texts]


async def test_messages_to_different_sessions_run_concurrently(store: SqlEventStore) -> None:
    rig, probe = _probed(store)
    async with client(rig) as c:
        sids = [await _session(c) for _ in range(4)]
        await asyncio.gather(
            *(
                c.post(f"/v1/sessions/{s}/messages", json={"text": "hi"}, headers=auth("alice"))
                for s in sids
            )
        )
        assert probe.peak > 1


async def test_openai_compatible_chat_keeps_a_session_through_its_header(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        body = {"model": "stoker", "messages": [{"role": "user", "content": "first"}]}
        r = await c.post("/v1/chat/completions", json=body, headers=auth("alice"))
        assert r.status_code == 200
        sid = r.headers["x-stoker-session"]
        data = r.json()
        assert data["object"] == "chat.completion"
        assert data["choices"][0]["message"] == {
            "role": "assistant",
            "content": "Understood: first",
            "refusal": None,
        }
        assert data["choices"][0]["finish_reason"] == "stop"
        history = [
            {"role": "system", "content": "ignored: the prefix is the server's"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "Understood: first"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ]
        r = await c.post(
            "/v1/chat/completions",
            json={"model": "claude-sonnet-4-6", "messages": history},
            headers={**auth("alice"), "X-Stoker-Session": sid},
        )
        assert r.headers["x-stoker-session"] == sid
        assert r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
        turns = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()["turns"]
        assert [t["user"] for t in turns] == ["first", "second"]


async def test_openai_compatible_chat_streams_chunks(store: SqlEventStore) -> None:
    async with client(make_rig(store)) as c:
        r = await c.post(
            "/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "stream me"}],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            headers=auth("alice"),
        )
        assert r.headers["x-stoker-session"]
        frames = [d for _, d in sse_events(r.text)]
        assert frames[-1] == "[DONE]"
        chunks = [json.loads(f) for f in frames[:-1]]
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        assert text == "Understood: stream me"
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["usage"]["completion_tokens"] > 0


async def test_the_openapi_schema_documents_every_route(store: SqlEventStore) -> None:
    rig = make_rig(store)
    app = create_app(rig.gateway, tokens=tokens())
    routes = {
        (r.path_format, m.lower())  # "{model:path}" is documented as "{model}"
        for r in app.routes
        if isinstance(r, Route)
        for m in (r.methods or ())
        if m != "HEAD"
    }
    async with client(rig) as c:
        doc = (await c.get("/openapi.json")).json()
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert documented == routes
    assert doc["openapi"].startswith("3.1")


async def test_tokens_and_keys_never_reach_the_logs(
    store: SqlEventStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rig = make_rig(store, api_key="sk-ant-api03-do-not-log-me")
    async with client(rig) as c:
        sid = await _session(c)
        await c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}, headers=auth("alice"))
        await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "/model claude-sonnet-4-5"},
            headers=auth("alice"),
        )
        await c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}, headers=auth("alice"))
        await c.get("/v1/sessions", headers={"Authorization": "Bearer wrong-token-value"})
    logged = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert "rebuilt the agent" in logged  # the log was on
    for secret in (*TOKENS.values(), "wrong-token-value", "sk-ant-api03-do-not-log-me"):
        assert secret not in logged


async def test_the_native_api_answers_json_of_an_output_schema(store: SqlEventStore) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    async with client(make_rig(store)) as c:
        sid = await _session(c)
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "Plan the trip.", "output": schema},
            headers=auth("alice"),
        )
        assert r.status_code == 200
        answer = json.loads(r.json()["text"])
        assert set(answer) == {"city", "days"}
        assert answer["days"] >= 1
        bad = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "x", "output": {"type": 7}},
            headers=auth("alice"),
        )
        assert bad.status_code == 400
        assert "output" in bad.text
