"""What Stoker's HTTP servers answer to a request head no real server would take, over
raw sockets, each server run as users run it (`stoker.http_server` starts them all).

A head over `MAX_HEAD_BYTES` gets 431 and the connection closes before the rest is
read; a request line without an HTTP version gets 400; a client that hangs up in the
middle of its body is one INFO line, not an error with a traceback. None of it stops
the server answering the next request. Generated heads, junk bytes included, never get
a 5xx from the simulator.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stoker
from stoker.gateway.local import local_gateway
from stoker.http_server import MAX_HEAD_BYTES
from stoker.providers.sim.server import create_app, serve_in_background
from tests.proxy_helpers import behind_proxy

KEY = "sk-test-http-limits"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A server on loopback: a GET it answers with 200, POSTs whose bodies it reads, and
    one that takes a body of 300 KB."""

    name: str
    address: tuple[str, int]
    get: str
    posts: tuple[str, ...]
    big: str
    auth: tuple[tuple[str, str], ...]


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


@pytest.fixture(scope="module", params=["sim", "gateway", "proxy"])
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    if request.param == "sim":
        with serve_in_background(create_app()) as sim:
            yield Target(
                name="sim",
                address=_address(sim.url),
                get="/stats",
                posts=("/v1/messages", "/sim/fail"),
                big="/v1/messages/count_tokens",
                auth=(("x-api-key", KEY),),
            )
    elif request.param == "gateway":
        with local_gateway() as (url, token):
            yield Target(
                name="gateway",
                address=_address(url),
                get="/healthz",
                posts=("/v1/sessions", "/v1/chat/completions"),
                big="/v1/sessions",
                auth=(("Authorization", f"Bearer {token}"),),
            )
    else:
        with behind_proxy(tmp_path_factory.mktemp("proxy")) as b:
            yield Target(
                name="proxy",
                address=_address(b.url),
                get="/stats",
                posts=("/v1/messages",),
                big="/v1/messages/count_tokens",
                auth=(("x-api-key", KEY),),
            )


def head(method: str, path: str, *headers: tuple[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: stoker.test", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def exchange(address: tuple[str, int], data: bytes, *, timeout: float = 10.0) -> bytes:
    """What the server sends back for `data` on a new connection, up to the end of the
    first response head (or until it closes). A server that hangs up while `data` is
    still going out is read from all the same: its answer came before the hang-up."""
    with socket.create_connection(address, timeout=timeout) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        received = b""
        while b"\r\n\r\n" not in received:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        return received


def status(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response[9:12])


def header_of(total: int) -> tuple[str, str]:
    """One header that brings a GET's head to about `total` bytes."""
    return ("X-Padding", "a" * (total - 100))


def answers(target: Target) -> bool:
    return status(exchange(target.address, head("GET", target.get, *target.auth))) == 200


def test_a_20_mb_header_gets_431_at_once_and_the_server_answers_the_next_request(
    target: Target,
) -> None:
    began = time.monotonic()
    response = exchange(target.address, head("GET", target.get, header_of(20_000_000)))
    assert status(response) == 431
    assert b"connection: close" in response.lower()
    assert time.monotonic() - began < 3.0
    assert answers(target)


@pytest.mark.parametrize(("size", "expected"), [(70 * 1024, 431), (60 * 1024, 200)])
def test_a_head_over_64_kib_gets_431_and_one_under_it_is_answered(
    target: Target, size: int, expected: int
) -> None:
    assert MAX_HEAD_BYTES == 64 * 1024
    response = exchange(target.address, head("GET", target.get, *target.auth, header_of(size)))
    assert status(response) == expected
    assert answers(target)


@pytest.mark.parametrize(
    "line",
    [b"GET /\r\n\r\n", b"GET /stats\r\n\r\n", b"GET / HTTP/0.9\r\n\r\n", b"GET / HTTP/2.0\r\n\r\n"],
)
def test_a_request_line_without_a_1x_version_gets_400(target: Target, line: bytes) -> None:
    assert status(exchange(target.address, line)) == 400
    assert answers(target)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record at INFO and above, uvicorn's too: an in-process gateway configures
    uvicorn's loggers not to propagate, which would hide its errors from `caplog`."""
    uvicorn_logger = logging.getLogger("uvicorn")
    uvicorn_logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO)
    try:
        yield caplog
    finally:
        uvicorn_logger.removeHandler(caplog.handler)


def _gone(records: list[logging.LogRecord], path: str) -> list[logging.LogRecord]:
    return [r for r in records if r.name == "stoker.http_server" and path in r.getMessage()]


def test_a_client_gone_mid_body_is_one_info_line_and_the_server_goes_on(
    target: Target, logs: pytest.LogCaptureFixture
) -> None:
    for path in target.posts:
        with socket.create_connection(target.address, timeout=10) as sock:
            framing = (("Content-Type", "application/json"), ("Content-Length", "1000"))
            sock.sendall(head("POST", path, *target.auth, *framing) + b'{"model": ')
            time.sleep(0.2)  # the handler is reading the body when the client goes
        deadline = time.monotonic() + 5
        while not _gone(logs.records, path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert answers(target)
        [record] = _gone(logs.records, path)
        assert record.levelno == logging.INFO
        assert record.exc_info is None
        assert record.getMessage() == (
            f"the client closed the connection before its request ended: POST {path}"
        )
    assert [r.getMessage() for r in logs.records if r.levelno >= logging.WARNING] == []
    assert "Traceback" not in logs.text


def test_a_big_body_then_a_request_on_one_connection_is_no_big_head(target: Target) -> None:
    """Bytes of a body before the next head are not counted as part of that head."""
    body = b'{"model": "claude-sonnet-4-6", "pad": "' + b"x" * 300_000 + b'"}'
    post = head(
        "POST",
        target.big,
        *target.auth,
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
    )
    get = head("GET", target.get, ("X-Padding", "b" * 60_000), ("Connection", "close"))
    with socket.create_connection(target.address, timeout=10) as sock:
        sock.sendall(post + body + get)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    statuses = [int(s) for s in re.findall(rb"HTTP/1\.1 (\d{3}) ", received)]
    assert len(statuses) == 2, received[:500]
    assert statuses[0] < 500
    assert statuses[1] == 200


# -- generated heads ---------------------------------------------------------------------------

_token = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEF0123456789-!#$%&'*+.^_`|~", min_size=1, max_size=12
)
_junk = st.binary(min_size=1, max_size=24)
_framing = (b"content-length", b"transfer-encoding")

# Each part of a head: what a client means to send, and what else may come.
PARTS: dict[str, tuple[list[bytes], st.SearchStrategy[bytes]]] = {
    "method": (
        [b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"PATCH"],
        st.sampled_from([b"CONNECT", b"TRACE", b"PRI", b"get", b""])
        | _token.map(str.encode)
        | _junk,
    ),
    "target": (
        [b"/", b"/stats", b"/v1/messages", b"/v1/chat/completions", b"/v1/responses", b"/x"],
        st.sampled_from(
            [b"*", b"//", b"/%zz", b"/%00", b"/a?b=%ff&c", b"http://x/stats", b"x:443", b"/" * 5000]
        )
        | _token.map(lambda t: b"/" + t.encode())
        | _junk,
    ),
    "version": (
        [b" HTTP/1.1", b" HTTP/1.0"],
        st.sampled_from(
            [
                b"",
                b" HTTP/0.9",
                b" HTTP/2.0",
                b" HTTP/3.0",
                b" HTTP/1.2",
                b" http/1.1",
                b" RTSP/1.0",
            ]
        )
        | _junk.map(lambda j: b" " + j),
    ),
    # Body framing is left out: a head that declares a body rightly waits for the body.
    "name": (
        [b"Host", b"Accept", b"x-api-key", b"Authorization", b"Content-Type", b"anthropic-version"],
        st.sampled_from([b"Connection", b"Expect", b"Upgrade", b"Cookie", b" Host", b"Ho st"])
        | (_token.map(str.encode) | _junk).filter(
            lambda n: not any(f in n.lower() for f in _framing)
        ),
    ),
    "value": (
        [b"stoker.test", b"*/*", b"application/json", b"sk-x", b"Bearer sk-x", b"2023-06-01"],
        st.sampled_from([b"", b"close", b"keep-alive", b"100-continue", b"websocket", b"upgrade"])
        | st.binary(max_size=40),
    ),
    "separator": ([b": "], st.sampled_from([b":", b" : ", b"", b"\t:\t"])),
}


@st.composite
def request_heads(draw: st.DrawFn) -> bytes:
    """A request line and up to six headers, well formed but for one part, or several, or
    none: so as many heads reach the app as stop at the parser."""
    spoiled = draw(st.sampled_from([(), *((p,) for p in PARTS), tuple(PARTS)]))

    def part(name: str) -> bytes:
        good, odd = PARTS[name]
        return draw(odd | st.sampled_from(good) if name in spoiled else st.sampled_from(good))

    line = part("method") + b" " + part("target") + part("version") + b"\r\n"
    fields = [(part("name"), part("value")) for _ in range(draw(st.integers(1, 6)))]
    separator = part("separator")
    return line + b"".join(n + separator + v + b"\r\n" for n, v in fields) + b"\r\n"


def test_generated_request_heads_never_get_a_5xx_from_the_simulator() -> None:
    seen: set[int] = set()
    with serve_in_background(create_app()) as sim:
        address = _address(sim.url)

        @settings(
            max_examples=300,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(data=request_heads())
        def one(data: bytes) -> None:
            response = exchange(address, data, timeout=5.0)
            code = status(response)
            seen.add(code)
            assert code < 500, (data[:300], response[:300])
            assert status(exchange(address, head("GET", "/stats"))) == 200

        one()
    assert {200, 400} <= seen


# -- the one door ------------------------------------------------------------------------------


def test_every_server_starts_through_the_starter() -> None:
    """No module but `stoker.http_server` calls `uvicorn.run` or makes a `uvicorn.Config`,
    so every server Stoker runs gets its protocol and its limits."""
    root = Path(stoker.__file__).parent
    starters = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "uvicorn"
                and node.func.attr in ("run", "Config")
            ) or (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("uvicorn")
                and {a.name for a in node.names} & {"run", "Config"}
            ):
                starters.add(path.relative_to(root).as_posix())
    assert starters == {"http_server.py"}
