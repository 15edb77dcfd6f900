"""The gateway under hostile input, against a real server on loopback, on both stores.

Hundreds of generated bad requests (`tests/hostile_http.py`) go through one keep-alive
connection: none may get a 5xx, every 4xx carries the JSON error, the connection must
stay open (each request is followed by another that must arrive on the same one), and
every session the requests touched must still answer a normal message afterwards.
The same examples run every time (derandomized); each case the generator found is kept
below as an example with the exact answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stoker.gateway.auth import TokenTable
from stoker.gateway.config import GatewayConfig
from stoker.gateway.local import local_gateway
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.store.sqlite import SQLiteStore
from tests.hostile_http import KINDS, Probe, probes
from tests.store_fixtures import BACKENDS, postgres_dsn

EXAMPLES = 400


@dataclass
class Served:
    """A gateway on loopback, one keep-alive client to it, and what that client saw."""

    client: httpx.Client
    sid: str
    port: int | None = None  # the client's local port: a new one, a dropped connection
    touched: set[str] = field(default_factory=set)

    def send(self, probe: Probe) -> httpx.Response:
        """`probe`'s response, after a second request on the same connection: a probe is
        judged by its own effect, so hypothesis shrinks the request that did the harm."""
        self.port = None
        r = self.client.request(
            probe.method, probe.path, headers=probe.headers, content=probe.body()
        )
        self.check_connection(r)
        self.check_connection(self.client.get("/healthz"))
        self.touched |= sessions_named(r)
        return r

    def check_connection(self, r: httpx.Response) -> None:
        assert "close" not in r.headers.get("connection", "").lower(), "the server hung up"
        port = client_port(r)
        assert port is not None, "the server closed the connection after this response"
        assert self.port in (None, port), "a response before this one dropped the connection"
        self.port = port

    def message(self, sid: str, text: str) -> httpx.Response:
        r = self.client.post(f"/v1/sessions/{sid}/messages", json={"text": text})
        self.check_connection(r)
        return r


def client_port(r: httpx.Response) -> int | None:
    """The local port of the connection `r` came on; None once that connection is closed."""
    try:
        return int(r.extensions["network_stream"].get_extra_info("client_addr")[1])
    except OSError:
        return None


def sessions_named(r: httpx.Response) -> set[str]:
    """The session ids a successful response names (created, continued in, answered for)."""
    if r.status_code >= 400:
        return set()
    found = {r.headers["x-stoker-session"]} if "x-stoker-session" in r.headers else set()
    if r.headers["content-type"] == "application/json":
        body = r.json()
        keys = ["session_id", "new_session_id"] + (["id"] if r.status_code == 201 else [])
        found |= {body[k] for k in keys if body.get(k)}
    return found


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest) -> Iterator[Served]:
    postgres = postgres_dsn() if request.param == "postgres" else None
    with local_gateway(postgres=postgres) as (url, token):
        headers = {"Authorization": f"Bearer {token}"}
        limits = httpx.Limits(max_connections=1)
        with httpx.Client(base_url=url, headers=headers, timeout=30, limits=limits) as client:
            yield Served(client=client, sid=client.post("/v1/sessions", json={}).json()["id"])


@pytest.fixture
def served(server: Served) -> Served:
    """The module's gateway; each test checks the connection from its own first request,
    so one test's dropped connection is not blamed on the next."""
    server.port = None
    return server


OPENAI_PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/models")


def assert_error_shape(r: httpx.Response) -> dict[str, Any]:
    """The error body, in OpenAI's shape on the OpenAI-compatible endpoints (the
    gateway's own type is then the code), in the gateway's elsewhere; returned as the
    gateway's {type, message}."""
    assert r.headers["content-type"] == "application/json", r.text[:300]
    body = r.json()
    assert set(body) == {"error"}
    error = dict(body["error"])
    if r.request.url.path in OPENAI_PATHS:
        assert set(error) == {"type", "message", "param", "code"}
        assert error["type"] in ("invalid_request_error", "server_error"), error
        error = {"type": error["code"], "message": error["message"]}
    assert set(error) == {"type", "message"}
    assert isinstance(error["type"], str)
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


def test_generated_hostile_requests_get_a_4xx_and_leave_the_gateway_working(
    served: Served,
) -> None:
    sent: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(probe=probes(served.sid))
    def one(probe: Probe) -> None:
        sent[probe.kind] += 1
        r = served.send(probe)
        assert r.status_code < 500, r.text[:300]
        assert '"type":"internal"' not in r.text
        if probe.expect is not None:
            assert r.status_code in probe.expect, (r.status_code, r.text[:300])
        if r.status_code >= 400:
            assert_error_shape(r)
        if probe.never_streams:
            assert not r.headers["content-type"].startswith("text/event-stream")

    one()
    assert sum(sent.values()) >= 300
    assert set(sent) == set(KINDS)
    for sid in sorted({served.sid, *served.touched}):
        r = served.message(sid, "hello after all that")
        assert r.status_code == 200, r.text[:300]
        assert r.json()["text"] == "Understood: hello after all that"


def _error(served: Served, r: httpx.Response, status: int, kind: str) -> str:
    served.check_connection(r)
    assert r.status_code == status, r.text[:300]
    error = assert_error_shape(r)
    assert error["type"] == kind
    return str(error["message"])


def _history(served: Served) -> list[str]:
    r = served.client.get(f"/v1/sessions/{served.sid}")
    return [t["user"] for t in r.json()["turns"]]


def test_a_nul_character_is_refused_and_nothing_is_stored(served: Served) -> None:
    before = _history(served)
    r = served.client.post(f"/v1/sessions/{served.sid}/messages", json={"text": "a\x00b"})
    assert "NUL" in _error(served, r, 400, "invalid_request")
    chat = {"messages": [{"role": "user", "content": [{"type": "text", "text": "\x00"}]}]}
    r = served.client.post(
        "/v1/chat/completions", json=chat, headers={"X-Stoker-Session": served.sid}
    )
    assert "NUL" in _error(served, r, 400, "invalid_request")
    assert _history(served) == before


def test_other_control_characters_are_stored_and_sent_as_they_are(served: Served) -> None:
    text = "tab\there\nnew line\r\n bell\x07 escape\x1b[31m del\x7f c1\x85\x9f sep\u2028end"
    r = served.message(served.sid, text)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == f"Understood: {text}"  # the simulator echoes what it was sent
    assert _history(served)[-1] == text


@dataclass(frozen=True)
class Case:
    """A request the generator found a wrong answer to (a 500, a 200, a stream), with the
    answer it gets now: its status, error type, and words of its message."""

    name: str
    path: str
    content: bytes
    status: int
    says: str
    content_type: str = "application/json"
    type: str = "invalid_request"


_MESSAGES = "/v1/sessions/{sid}/messages"
_CHAT = "/v1/chat/completions"


def _chat(content: str) -> bytes:
    return b'{"messages": [{"role": "user", "content": ' + content.encode() + b"}]}"


CASES = [
    Case("deep array", _MESSAGES, b"[" * 5000, 400, "nested too deeply"),
    Case("deep array, chat", _CHAT, b"[" * 5000, 400, "nested too deeply"),
    Case("deep object", "/v1/sessions", b'{"a":' * 3000, 400, "nested too deeply"),
    Case(
        "deep but closed",
        _MESSAGES,
        b'{"text": "x", "a": ' + b"[" * 201 + b"]" * 201 + b"}",
        400,
        "nested too deeply",
    ),
    Case("lone surrogate", _MESSAGES, b'{"text": "\\ud800"}', 400, "half of a pair"),
    Case("lone low surrogate", _MESSAGES, b'{"text": "\\udfffx"}', 400, "surrogate"),
    Case("lone surrogate, chat", _CHAT, _chat('"a\\ud83d"'), 400, "half of a pair"),
    Case(
        "lone surrogate, ignored system message",
        _CHAT,
        b'{"messages": [{"role": "system", "content": "\\ude00"}, '
        b'{"role": "user", "content": "hi"}]}',
        400,
        "surrogate",
    ),
    Case("surrogate as UTF-8 bytes", _MESSAGES, b'{"text": "\xed\xa0\x80"}', 400, "UTF-8"),
    Case("latin-1 bytes", _MESSAGES, b'{"text": "caf\xe9"}', 400, "UTF-8"),
    Case("byte order mark", _MESSAGES, b'\xef\xbb\xbf{"text": "hi"}', 400, "not JSON"),
    Case("UTF-16", _MESSAGES, '{"text": "hi"}'.encode("utf-16"), 400, "not JSON"),
    Case(
        "5,000-digit number",
        "/v1/sessions",
        b'{"model": ' + b"9" * 5000 + b"}",
        400,
        "more than 4,300 digits",
    ),
    Case(
        "text part with null text",
        _CHAT,
        _chat('[{"type": "text", "text": null}]'),
        400,
        "needs 'text', a string",
    ),
    Case(
        "text part with an object",
        _CHAT,
        _chat('[{"type": "text", "text": {"a": 1}}]'),
        400,
        "text: Input should be a valid string",
    ),
    Case(
        "unknown role",
        _CHAT,
        b'{"messages": [{"role": "robot", "content": "hi"}]}',
        400,
        "messages.0.role",
    ),
    Case(
        "text/plain",
        _MESSAGES,
        b'{"text": "hi"}',
        415,
        "application/json",
        content_type="text/plain",
        type="unsupported_media_type",
    ),
    Case(
        "form",
        "/v1/sessions",
        b"{}",
        415,
        "application/json",
        content_type="application/x-www-form-urlencoded",
        type="unsupported_media_type",
    ),
    Case(
        "JSON in latin-1",
        _MESSAGES,
        b'{"text": "hi"}',
        415,
        "UTF-8",
        content_type="application/json; charset=latin-1",
        type="unsupported_media_type",
    ),
    Case("limit ²", "/v1/sessions?limit=%C2%B2", b"", 400, "limit must be a whole number"),
    Case("5,000-digit limit", "/v1/sessions?limit=" + "9" * 5000, b"", 400, "1 to 500"),
    Case(
        "stream=maybe",
        _MESSAGES + "?stream=maybe",
        b'{"text": "hi"}',
        400,
        "stream must be true or false",
    ),
    Case(
        "empty message, streamed",
        _MESSAGES + "?stream=true",
        b'{"text": " "}',
        400,
        "the message is empty",
    ),
    Case(
        "NUL, streamed",
        _CHAT,
        b'{"stream": true, "messages": [{"role": "user", "content": "\\u0000"}]}',
        400,
        "NUL",
    ),
    Case(
        "unknown command, streamed",
        _MESSAGES + "?stream=1",
        b'{"text": "/nope"}',
        400,
        "unknown command /nope",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_found_case_gets_its_4xx(served: Served, case: Case) -> None:
    method = "GET" if "limit=" in case.path else "POST"
    r = served.client.request(
        method,
        case.path.format(sid=served.sid),
        content=case.content or None,
        headers={"Content-Type": case.content_type},
    )
    assert case.says in _error(served, r, case.status, case.type)
    assert served.message(served.sid, "still here").status_code == 200


@pytest.mark.parametrize(
    ("accept", "streams"),
    [
        ("text/event-stream", True),
        ("text/event-stream;q=0", False),
        ("text/event-stream; q=0.000", False),
        ("text/event-stream;q=0, */*", False),
        ("application/json, text/event-stream;q=0.5", False),
        ("application/json;q=0.5, text/event-stream", True),
        ("text/event-stream, application/json", True),
        ("text/event-stream;q=2", False),  # a malformed q: the range is not counted
        ("*/*", False),
        ("", False),
    ],
)
def test_accept_streams_only_when_it_prefers_event_streams(
    served: Served, accept: str, streams: bool
) -> None:
    r = served.client.post(
        _MESSAGES.format(sid=served.sid), json={"text": "hello"}, headers={"Accept": accept}
    )
    served.check_connection(r)
    assert r.status_code == 200
    kind = "text/event-stream" if streams else "application/json"
    assert r.headers["content-type"].split(";")[0] == kind


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/sessions", {"GET", "HEAD", "POST"}),
        ("/v1/sessions/{sid}", {"GET", "HEAD", "DELETE"}),
        ("/v1/sessions/{sid}/messages", {"POST"}),
    ],
)
def test_a_405_names_every_method_the_path_takes(
    served: Served, path: str, allowed: set[str]
) -> None:
    r = served.client.put(path.format(sid=served.sid))
    assert "Method Not Allowed" in _error(served, r, 405, "method_not_allowed")
    assert set(r.headers["allow"].split(", ")) == allowed
    head = served.client.head(path.format(sid=served.sid))
    assert head.status_code == (200 if "HEAD" in allowed else 405)  # HEAD is GET, bodiless


def test_an_unexpected_error_is_a_json_500_on_a_connection_that_stays_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    config = GatewayConfig(tokens=TokenTable({}))
    app = build_app(config, build_gateway(config, store=SQLiteStore(tmp_path / "gw.db")))
    app.router.routes.append(Route("/broken", broken))
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        r = client.get("/broken")
        assert r.status_code == 500
        assert assert_error_shape(r) == {"type": "internal", "message": "internal error"}
        port = client_port(r)
        again = client.get("/healthz")
        assert again.status_code == 200
        assert port is not None
        assert client_port(again) == port
    assert "unexpected error in GET /broken" in caplog.text
