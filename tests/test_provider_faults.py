"""Provider faults through the real adapters (official SDKs) against a faulty upstream on
a loopback socket: each fault is a documented `ProviderError`, retried where the policy
says (the upstream counts its hits), and the session works again once the upstream does.

Policy under test (`stoker.providers.retry`): a malformed answer is retried like a 5xx;
a connect or first-byte timeout is retried; the total timeout bounds the call, retries
included, and is never retried; a stream that broke after its text reached the caller
is not retried.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from stoker import Agent, Callbacks, Session
from stoker.errors import ProviderError, ProviderTimeout
from stoker.providers.anthropic import AnthropicProvider
from stoker.providers.openai import QUIRKS, OpenAIProvider
from stoker.providers.retry import RetryPolicy, Timeouts
from stoker.providers.sim._background import serve_in_background
from stoker.providers.sim.server import create_app
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock
from stoker.wire.messages import AssistantMessage
from tests.faulty_upstream import (
    CUT_TEXT,
    UPSTREAM_CLOCK,
    Fault,
    FaultyUpstream,
    body_fault,
    cut_stream,
    hang_after_headers,
    hang_before_headers,
    held_port,
    no_wait,
    sse_fault,
    stall_after_first_event,
)
from tests.helpers import SYSTEM, make_registry

KINDS = ["anthropic", "openai-chat", "openai-responses"]
MODELS = {"anthropic": "claude-sonnet-4-6", "openai-chat": "gpt-5.6", "openai-responses": "gpt-5.6"}
CLOCK = UPSTREAM_CLOCK
RETRIES = 2
SHORT = Timeouts(connect=0.2, first_byte=0.2, total=5.0)

BODY_FAULTS: dict[str, Fault] = {
    "malformed JSON": body_fault("application/json", b'{"id": "msg_01", "content": [{"ty'),
    "HTML": body_fault("text/html; charset=utf-8", b"<html><h1>502 Bad Gateway</h1></html>"),
    "an empty body": body_fault("application/json", b""),
    "the wrong JSON shape": body_fault("application/json", b'[{"id": "x", "result": "hi"}]'),
}
STREAM_FAULTS: dict[str, Fault] = {
    "events that are not JSON": sse_fault([b"data: this is not json\n\n"] * 3),
    "lines that are not SSE": sse_fault([b"<html>\n", b"<body>oops</body>\n", b"</html>\n"]),
    "events of the wrong shape": sse_fault(
        [
            b'data: {"type": "content_block_delta"}\n\n',
            b'data: {"type": "response.output_item.done"}\n\n',
            b'data: {"choices": "x"}\n\n',
        ]
    ),
    "a stream cut before its text": cut_stream(after_text=False),
}


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_adapter(kind: str, url: str, timeouts: Timeouts) -> AnthropicProvider | OpenAIProvider:
    retry = RetryPolicy(max_retries=RETRIES, sleep=no_wait, timeouts=timeouts)
    key = f"sk-faults-{uuid.uuid4().hex}"  # a fresh simulator workspace
    if kind == "anthropic":
        return AnthropicProvider(api_key=key, base_url=url, retry=retry, clock=CLOCK)
    return OpenAIProvider(
        api_key=key,
        api="responses" if kind == "openai-responses" else "chat",
        base_url=url + "/v1",
        quirks=QUIRKS["openai"],
        retry=retry,
        clock=CLOCK,
    )


@asynccontextmanager
async def session_on(kind: str, url: str, timeouts: Timeouts = SHORT) -> AsyncIterator[Session]:
    async with make_adapter(kind, url, timeouts) as provider:
        agent = Agent(
            provider=provider,
            model=MODELS[kind],
            registry=make_registry(),
            system=SYSTEM,
            clock=CLOCK,
        )
        yield agent.session()


def streamed(on: bool) -> Callbacks | None:
    return Callbacks(on_text=lambda _: None) if on else None


async def works_again(session: Session, *, stream: bool = False) -> None:
    """The next message is answered, and the failed call left no answer and no call
    without its result in the history."""
    before = len(session.history)
    result = await session.send("hello again", callbacks=streamed(stream))
    # The model is told the failed message got no answer, then answers this one.
    assert result.text.startswith("Understood: hello again")
    assert "got no answer" in result.text
    assert [m.role for m in session.history[before:]] == ["user", "assistant"]
    calls = {b.id for m in session.history for b in m.content if isinstance(b, ToolUseBlock)}
    answered = {
        b.tool_use_id for m in session.history for b in m.content if isinstance(b, ToolResultBlock)
    }
    assert calls == answered


@pytest.mark.parametrize(
    ("fault", "stream"),
    [(name, False) for name in BODY_FAULTS] + [("HTML", True), ("an empty body", True)],
)
async def test_a_malformed_200_is_a_provider_error_retried_like_a_5xx(
    kind: str, upstream: tuple[str, FaultyUpstream], fault: str, stream: bool
) -> None:
    url, faulty = upstream
    async with session_on(kind, url) as session:
        faulty.fail_next(BODY_FAULTS[fault], times=RETRIES + 1)
        with pytest.raises(ProviderError) as caught:
            await session.send("hello", callbacks=streamed(stream))
        assert type(caught.value) is ProviderError  # not a WireError, not a KeyError
        assert f"failed after {RETRIES + 1} attempts: a malformed answer" in str(caught.value)
        assert faulty.hits == RETRIES + 1
        assert [m.role for m in session.history] == ["user"]  # no assistant message
        await works_again(session, stream=stream)


@pytest.mark.parametrize("fault", list(STREAM_FAULTS))
async def test_a_stream_of_garbage_is_a_provider_error_retried_like_a_5xx(
    kind: str, upstream: tuple[str, FaultyUpstream], fault: str
) -> None:
    url, faulty = upstream
    async with session_on(kind, url) as session:
        faulty.fail_next(STREAM_FAULTS[fault], times=RETRIES)
        result = await session.send("hello", callbacks=streamed(True))
        assert result.text == "Understood: hello"  # the last retry reached the simulator
        assert result.records[0].retries == RETRIES
        faulty.fail_next(STREAM_FAULTS[fault], times=RETRIES + 1)
        with pytest.raises(ProviderError, match="a malformed answer \\(text/event-stream"):
            await session.send("hello", callbacks=streamed(True))
        assert faulty.hits == 2 * RETRIES + 2
        await works_again(session, stream=True)


async def test_a_stream_cut_after_its_text_is_not_retried(
    kind: str, upstream: tuple[str, FaultyUpstream]
) -> None:
    url, faulty = upstream
    texts: list[str] = []
    async with session_on(kind, url) as session:
        faulty.fail_next(cut_stream(after_text=True), times=RETRIES + 1)
        with pytest.raises(ProviderError, match="stream broke after text was delivered"):
            await session.send("hello", callbacks=Callbacks(on_text=texts.append))
        assert texts  # delivered once, and not repeated by a retry:
        assert CUT_TEXT.startswith("".join(texts))
        assert faulty.hits == 1
        faulty.faults.clear()
        await works_again(session, stream=True)


async def test_a_fault_after_a_tool_call_leaves_every_call_answered(
    kind: str, upstream: tuple[str, FaultyUpstream]
) -> None:
    url, faulty = upstream
    async with session_on(kind, url) as session:
        faulty.fail_next(BODY_FAULTS["HTML"], times=RETRIES + 1, after=1)
        with pytest.raises(ProviderError, match="malformed answer \\(text/html"):
            await session.send("read_file 'plan.md'")
        assert [m.role for m in session.history] == ["user", "assistant", "user"]
        assert isinstance(session.history[1], AssistantMessage)
        assert session.history[1].tool_calls  # answered by the tool result that follows
        await works_again(session)


# The first byte is due before the total: a stalled stream must be cut by `total` (it
# did start), and without retries (each would wait for its first byte again).
STALLS = Timeouts(connect=1.0, first_byte=0.2, total=0.8)


@pytest.mark.parametrize(
    ("fault", "stream", "timeouts", "phase", "says", "hits"),
    [
        (hang_after_headers, True, SHORT, "first_byte", "did not start within 0.2 s", RETRIES + 1),
        (hang_before_headers, False, STALLS, "total", "within 0.8 s (the total timeout", 1),
        (stall_after_first_event, True, STALLS, "total", "within 0.8 s (the total timeout", 1),
    ],
    ids=["no-first-event", "no-answer", "stalled-stream"],
)
async def test_a_hung_upstream_times_out_and_is_retried_as_the_policy_says(
    kind: str,
    upstream: tuple[str, FaultyUpstream],
    fault: Fault,
    stream: bool,
    timeouts: Timeouts,
    phase: str,
    says: str,
    hits: int,
) -> None:
    url, faulty = upstream
    async with session_on(kind, url, timeouts) as session:
        faulty.fail_next(fault, times=RETRIES + 1)
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as caught:
            await session.send("hello", callbacks=streamed(stream))
        elapsed = time.monotonic() - started
        assert (caught.value.phase, faulty.hits) == (phase, hits)
        assert says in str(caught.value)
        assert min(hits * timeouts.first_byte, timeouts.total) <= elapsed < 3.0
        faulty.faults.clear()
        await works_again(session, stream=stream)


async def test_a_host_that_never_accepts_times_out_at_connect_and_is_retried(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stoker.providers.retry")
    with held_port() as sock:
        host, port = sock.getsockname()
        url = f"http://{host}:{port}"
        async with session_on(kind, url) as session:
            started = time.monotonic()
            with pytest.raises(ProviderTimeout) as caught:
                await session.send("hello")
            elapsed = time.monotonic() - started
            assert caught.value.phase == "connect"
            assert f"could not connect to {url}" in str(caught.value)
            assert "within 0.2 s (the connect timeout)" in str(caught.value)
            retries = [r for r in caplog.records if "retry" in r.getMessage()]
            assert len(retries) == RETRIES
            assert (RETRIES + 1) * 0.2 <= elapsed < 3.0
            # The upstream comes up on the port the client has been knocking on.
            with serve_in_background(FaultyUpstream(create_app(clock=CLOCK)), sock=sock):
                await works_again(session)


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(Exception, match="more than 0 seconds"):
        Timeouts(first_byte=0)
    sdk: Any = Timeouts(connect=3, total=30).for_sdk()
    assert (sdk.connect, sdk.pool, sdk.read, sdk.write) == (3, 3, 30, 30)
