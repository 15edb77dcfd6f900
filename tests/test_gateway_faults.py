"""Provider faults through the gateway: a real Anthropic or OpenAI adapter (built by the
gateway's own provider factory, with short timeouts) against a faulty upstream on a
loopback socket. A malformed answer is a 502 `provider_error`, a timeout a 504
`provider_timeout`, over JSON and in the stream's `error` event alike; the session's
lock is released, so the next message to it is served.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import httpx
import pytest

from stoker.gateway.app import create_app
from stoker.gateway.providers import factory_for
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.retry import RetryPolicy, Timeouts
from stoker.store.base import SqlEventStore
from tests.faulty_upstream import (
    Fault,
    FaultyUpstream,
    body_fault,
    hang_after_headers,
    hang_before_headers,
    no_wait,
    sse_fault,
)
from tests.helpers import SYSTEM, make_registry
from tests.test_gateway_support import auth, sse_events, tokens

RETRIES = 1
TIMEOUTS = Timeouts(connect=0.2, first_byte=0.2, total=0.6)
HTML = body_fault("text/html", b"<html><h1>502 Bad Gateway</h1></html>")
GARBAGE = sse_fault([b"data: this is not json\n\n"] * 3)
ROUTES = {
    "anthropic": {"provider": "anthropic", "model": "claude-sonnet-4-6"},
    "openai": {"provider": "openai", "model": "gpt-5.6", "api_mode": "responses"},
}


@pytest.fixture(params=list(ROUTES))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def gateway_on(store: SqlEventStore, kind: str, url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a gateway whose sessions call the faulty upstream through the real
    adapters, made by the gateway's own provider factory."""
    base_url = url if kind == "anthropic" else url + "/v1"
    retry = RetryPolicy(max_retries=RETRIES, sleep=no_wait, timeouts=TIMEOUTS)
    gateway = Gateway(
        store=store,
        defaults=SessionSettings(**ROUTES[kind], base_url=base_url, system=SYSTEM),
        api_key=f"sk-gateway-faults-{uuid.uuid4().hex}",
        provider_factory=factory_for(retry),
        registry=make_registry(),
        keep_warm=False,
    )
    transport = httpx.ASGITransport(app=create_app(gateway, tokens=tokens()))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as c:
            yield c
    finally:
        await gateway.close()


async def _session(c: httpx.AsyncClient) -> str:
    r = await c.post("/v1/sessions", json={}, headers=auth("alice"))
    assert r.status_code == 201
    return str(r.json()["id"])


async def _message(c: httpx.AsyncClient, sid: str, text: str, *, stream: bool = False) -> Any:
    url = f"/v1/sessions/{sid}/messages" + ("?stream=1" if stream else "")
    return await c.post(url, json={"text": text}, headers=auth("alice"))


def _error_event(body: str) -> dict[str, Any]:
    events = sse_events(body)
    assert events[-1][0] == "error", events
    return json.loads(events[-1][1])["error"]  # type: ignore[no-any-return]


async def _served_again(c: httpx.AsyncClient, sid: str, *, stream: bool = False) -> None:
    """The session's lock was released and its history takes another message."""
    r = await _message(c, sid, "hello again", stream=stream)
    assert r.status_code == 200
    if stream:
        assert sse_events(r.text)[-1][0] == "done"
    else:
        # The model is told the failed message got no answer (CUT_OFF), then answers.
        text = r.json()["text"]
        assert text.startswith("Understood: hello again")
        assert "got no answer" in text
    turns = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()["turns"]
    # The failed message is stored without an answer; the next one is answered.
    assert [t["user"] for t in turns] == ["hello", "hello again"]
    assert turns[0]["answer"] == ""
    assert turns[1]["answer"].startswith("Understood: hello again")


class Case(NamedTuple):
    """One row of the failure table (docs/failures.md), as the gateway must answer it."""

    fault: Fault
    stream: bool
    status: int  # a stream has answered 200 before the provider failed
    error_type: str
    says: str
    hits: int  # malformed answers and first-byte timeouts are retried, the total is not


CASES = {
    "html-json": Case(HTML, False, 502, "provider_error", "a malformed answer", RETRIES + 1),
    "html-sse": Case(HTML, True, 200, "provider_error", "a malformed answer", RETRIES + 1),
    "garbage-sse": Case(GARBAGE, True, 200, "provider_error", "a malformed answer", RETRIES + 1),
    "no-answer-json": Case(hang_before_headers, False, 504, "provider_timeout", "total timeout", 1),
    "no-first-event-sse": Case(
        hang_after_headers, True, 200, "provider_timeout", "first-byte timeout", RETRIES + 1
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_a_provider_fault_is_a_typed_error_and_the_session_takes_the_next_message(
    store: SqlEventStore, kind: str, upstream: tuple[str, FaultyUpstream], case: Case
) -> None:
    url, faulty = upstream
    async with gateway_on(store, kind, url) as c:
        sid = await _session(c)
        faulty.fail_next(case.fault, times=RETRIES + 1)
        started = time.monotonic()
        r = await _message(c, sid, "hello", stream=case.stream)
        assert time.monotonic() - started < 3.0
        assert r.status_code == case.status
        error = _error_event(r.text) if case.stream else r.json()["error"]
        assert error["type"] == case.error_type
        assert case.says in error["message"]
        assert faulty.hits == case.hits
        faulty.faults.clear()
        await _served_again(c, sid, stream=case.stream)


async def test_a_message_waiting_behind_a_hung_one_is_served_once_it_times_out(
    store: SqlEventStore, upstream: tuple[str, FaultyUpstream]
) -> None:
    url, faulty = upstream
    async with gateway_on(store, "anthropic", url) as c:
        sid = await _session(c)
        faulty.fail_next(hang_before_headers)
        hung = asyncio.create_task(_message(c, sid, "hello"))
        # The first message holds the session's lock while its call hangs upstream.
        assert await asyncio.to_thread(faulty.called.wait, 5.0)
        second = await _message(c, sid, "hello again")
        assert (await hung).status_code == 504
        assert second.status_code == 200
        assert second.json()["text"].startswith("Understood: hello again")


async def test_the_openai_compatible_endpoint_reports_the_same_types(
    store: SqlEventStore, upstream: tuple[str, FaultyUpstream]
) -> None:
    url, faulty = upstream
    async with gateway_on(store, "anthropic", url) as c:
        body = {"messages": [{"role": "user", "content": "hello"}]}
        faulty.fail_next(HTML, times=RETRIES + 1)
        r = await c.post("/v1/chat/completions", json=body, headers=auth("alice"))
        assert r.status_code == 502  # OpenAI's type; the gateway's own is the code
        assert r.json()["error"] == {
            "message": r.json()["error"]["message"],
            "type": "server_error",
            "param": None,
            "code": "provider_error",
        }
        faulty.fail_next(hang_after_headers, times=RETRIES + 1)
        r = await c.post(
            "/v1/chat/completions", json={**body, "stream": True}, headers=auth("alice")
        )
        frames = [data for _, data in sse_events(r.text)]
        assert frames[-1] == "[DONE]"
        error = json.loads(frames[-2])["error"]
        assert (error["type"], error["code"]) == ("server_error", "provider_timeout")
        sid = r.headers["X-Stoker-Session"]
        r = await c.post(
            "/v1/chat/completions",
            json=body,
            headers={**auth("alice"), "X-Stoker-Session": sid},
        )
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"].startswith("Understood: hello")
