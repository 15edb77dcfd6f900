"""A provider that misbehaves on cue, over a real socket (fixtures, no tests).

`FaultyUpstream` is an ASGI app in front of the HTTP simulator: every model call
(Anthropic Messages, OpenAI Chat Completions, OpenAI Responses) takes the next queued
fault, or goes to the simulator when none is queued, so a test breaks a call and then
sees the session recover against a working provider. It counts the model calls it
received (`hits`), which is how a test tells how often an adapter retried.

`held_port` is a port where a connection cannot be opened at all: the listening
socket's accept queue is full, so the kernel drops further SYNs and `connect` hangs.
`serve_in_background(..., sock=...)` later serves on that same socket (the upstream
"recovers").
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from stoker.clock import FrozenClock
from stoker.providers.sim._background import serve_in_background
from stoker.providers.sim.server import create_app
from stoker.wire.blocks import TextBlock
from stoker.wire.dialects import anthropic_stream, dialect_module, openai_chat_stream
from stoker.wire.dialects import openai_responses_stream as responses_stream
from stoker.wire.dialects.sse import Decoder
from stoker.wire.messages import AssistantMessage
from stoker.wire.usage import Usage

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Fault = Callable[[str, Receive, Send], Awaitable[None]]

DIALECTS = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
}
_STREAMS: dict[str, Any] = {
    "anthropic": anthropic_stream,
    "openai_chat": openai_chat_stream,
    "openai_responses": responses_stream,
}


async def _answer(send: Send, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _until_gone(receive: Receive) -> None:
    """Wait until the client hangs up (a hanging upstream; ends when the test's call does)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def body_fault(content_type: str, body: bytes) -> Fault:
    """A 200 with `body`, whatever the request (streamed or not) asked for."""

    async def fault(dialect: str, receive: Receive, send: Send) -> None:
        await _answer(send, 200, content_type, body)

    return fault


def sse_fault(lines: list[bytes]) -> Fault:
    """A 200 event stream that sends `lines` and ends."""
    return body_fault("text/event-stream", b"".join(lines))


CUT_TEXT = "half an answer " * 8


def _frames(dialect: str) -> list[bytes]:
    """The SSE frames of a well-formed text answer (`CUT_TEXT`) in `dialect`."""
    message = AssistantMessage(content=(TextBlock(text=CUT_TEXT),), id="cut")
    body = dialect_module(dialect).render_response(message, Usage(uncached=10, output=20), "m")
    return list(_STREAMS[dialect].frames(body))


def cut_stream(*, after_text: bool) -> Fault:
    """A well-formed stream in the request's dialect that ends cleanly before its last
    event: just after its first text delta, or after its first event (before any text)."""

    async def fault(dialect: str, receive: Receive, send: Send) -> None:
        frames = _frames(dialect)
        reader = _STREAMS[dialect].Accumulator()
        first_text = next(i for i, f in enumerate(frames) if _feed(reader, f))
        sent = frames[: first_text + 1] if after_text else frames[:1]
        await _answer(send, 200, "text/event-stream", b"".join(sent))

    return fault


async def stall_after_first_event(dialect: str, receive: Receive, send: Send) -> None:
    """Start a well-formed stream, send its first event, then nothing (the total timeout)."""
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _frames(dialect)[0], "more_body": True})
    await _until_gone(receive)


def _feed(reader: Any, frame: bytes) -> str | None:
    decoder = Decoder()
    for line in frame.decode().split("\n"):
        if (complete := decoder.feed(line)) is not None:
            return reader.feed_frame(complete[1])  # type: ignore[no-any-return]
    return None


async def hang_before_headers(dialect: str, receive: Receive, send: Send) -> None:
    """Accept the request and never answer (a non-streamed call waits for `total`)."""
    await _until_gone(receive)


async def hang_after_headers(dialect: str, receive: Receive, send: Send) -> None:
    """Start an event stream and never send an event (the first-byte timeout)."""
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await _until_gone(receive)


class FaultyUpstream:
    """The simulator, except for the model calls that take a queued fault."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.faults: list[Fault | None] = []  # None: this call goes to the simulator
        self.hits = 0
        self.called = threading.Event()  # set by the first model call (tests wait on it)

    def fail_next(self, fault: Fault, *, times: int = 1, after: int = 0) -> None:
        """The next `times` model calls get `fault`, after `after` calls that succeed."""
        self.faults = [None] * after + [fault] * times

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        dialect = DIALECTS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if dialect is None:
            return await self.sim(scope, receive, send)  # type: ignore[no-any-return]
        self.hits += 1
        self.called.set()
        fault = self.faults.pop(0) if self.faults else None
        if fault is None:
            return await self.sim(scope, receive, send)  # type: ignore[no-any-return]
        while (await receive()).get("more_body"):  # the request, read and ignored
            pass
        await fault(dialect, receive, send)


UPSTREAM_CLOCK = FrozenClock()


@pytest.fixture(scope="module")
def served_upstream() -> Iterator[tuple[str, FaultyUpstream]]:
    """A `FaultyUpstream` over a fresh simulator on a free loopback port, per test module."""
    faulty = FaultyUpstream(create_app(clock=UPSTREAM_CLOCK))
    with serve_in_background(faulty) as served:
        yield served.url, faulty


@pytest.fixture
def upstream(served_upstream: tuple[str, FaultyUpstream]) -> tuple[str, FaultyUpstream]:
    """(base URL, upstream) with no faults queued and no hits counted yet."""
    faulty = served_upstream[1]
    faulty.faults.clear()
    faulty.hits = 0
    faulty.called.clear()
    return served_upstream


@contextmanager
def held_port() -> Iterator[socket.socket]:
    """A bound, listening socket whose accept queue is full: `connect` to it hangs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)
    fillers = []
    for _ in range(3):  # one fits the queue of listen(0); the rest wait in SYN retries
        filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(sock.getsockname())
        fillers.append(filler)
    try:
        yield sock
    finally:
        for filler in fillers:
            filler.close()
        sock.close()


async def no_wait(seconds: float) -> None:
    """A retry policy's sleep that does not wait (backoff is tested elsewhere)."""
    await asyncio.sleep(0)
