"""Every provider adapter passes the same suite against `stoker sim serve` over HTTP.

The server runs for the module on a free loopback port; each test uses a fresh API key
(its own cache workspace). Adapters talk to it through the official SDKs exactly as
they would talk to the real APIs: real `stoker.Agent` sessions with tools, streaming,
forks, error mapping, retries and a rejected key.
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from stoker import Agent, CachePolicy, Callbacks
from stoker.cache.models import ModelInfo
from stoker.clock import FrozenClock
from stoker.errors import AuthenticationError, InvalidRequest, ProviderError
from stoker.providers.anthropic import AnthropicProvider
from stoker.providers.base import CallContext, Completion
from stoker.providers.openai import QUIRKS, OpenAIProvider
from stoker.providers.retry import RetryPolicy
from stoker.providers.sim.server import ServedSim, SimServer, create_app, serve_in_background
from stoker.wire.blocks import TextBlock, ThinkingBlock, ToolUseBlock
from stoker.wire.dialects import dialect_module
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from tests.helpers import SYSTEM, make_registry

Adapter = AnthropicProvider | OpenAIProvider
ADAPTERS = ["anthropic", "openai-chat", "openai-responses", "openai-compatible"]
MODELS = {
    "anthropic": "claude-sonnet-4-6",
    "openai-chat": "gpt-5.6",
    "openai-responses": "gpt-5.6",
    "openai-compatible": "gpt-4.1",
}
CLOCK = FrozenClock()


class Sleeps:
    """The retry policy's sleep, recorded instead of waited."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(scope="module")
def served() -> Iterator[ServedSim]:
    with serve_in_background(create_app(clock=CLOCK)) as served:
        yield served


@pytest.fixture
def sim(served: ServedSim) -> SimServer:
    return served.app.state.sim  # type: ignore[no-any-return]


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def adapter(kind: str, served: ServedSim, key: str, sleeps: Sleeps) -> Adapter:
    retry = RetryPolicy(sleep=sleeps)
    if kind == "anthropic":
        return AnthropicProvider(api_key=key, base_url=served.url, retry=retry, clock=CLOCK)
    return OpenAIProvider(
        api_key=key,
        api="responses" if kind == "openai-responses" else "chat",
        base_url=served.openai_url,
        name="openai-compatible" if kind == "openai-compatible" else "openai",
        quirks=QUIRKS["generic" if kind == "openai-compatible" else "openai"],
        retry=retry,
        clock=CLOCK,
    )


@pytest.fixture(params=ADAPTERS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def key() -> str:
    return f"sk-conformance-{uuid.uuid4().hex}"


@pytest.fixture
async def provider(
    kind: str, served: ServedSim, key: str, sleeps: Sleeps
) -> AsyncIterator[Adapter]:
    async with adapter(kind, served, key, sleeps) as provider:
        yield provider


def agent_for(provider: Adapter, kind: str, calls: list[str] | None = None) -> Agent:
    return Agent(
        provider=provider,
        model=MODELS[kind],
        registry=make_registry(calls),
        system=SYSTEM,
        clock=CLOCK,
    )


def fail_next(served: ServedSim, **failure: Any) -> None:
    httpx.post(served.url + "/sim/fail", json=failure).raise_for_status()


def _top_level(payload: dict[str, Any]) -> dict[str, str]:
    # The SDKs order top-level fields their own way; everything inside is compared as bytes.
    return {k: json.dumps(v) for k, v in payload.items()}


def _without_ids(history: tuple[Message, ...]) -> list[Message]:
    return [replace(m, id="") if isinstance(m, AssistantMessage) else m for m in history]


async def test_multi_turn_with_tools_sends_exactly_the_rendered_payload(
    provider: Adapter, kind: str, sim: SimServer, key: str
) -> None:
    calls: list[str] = []
    sent: list[Request] = []
    recording = _Recording(provider, sent)
    session = replace(agent_for(provider, kind, calls), provider=recording).session()
    first = await session.send("read_file 'plan.md'")
    second = await session.send("list_files please")
    assert calls == ["read_file", "list_files"]
    assert first.text == "Done. Tool results: read_file ok: plan.md"
    records = [*first.records, *second.records]
    assert [r.explanation.verdict for r in records] == ["first", "hit", "hit", "hit"]
    assert all(r.usage.read > 1024 for r in records[1:])
    assert {(r.provider, r.retries) for r in records} == {(provider.name, 0)}
    call = session.history[1]
    assert isinstance(call, AssistantMessage)
    assert isinstance(call.content[-1], ToolUseBlock)
    module = dialect_module("anthropic" if kind == "anthropic" else provider_dialect(provider))
    rendered = module.render_request(sent[-1])
    assert _top_level(sim.sent_by(key)[-1]) == _top_level(rendered)


class _Recording:
    """The adapter, keeping every `Request` Stoker hands it."""

    def __init__(self, inner: Adapter, sent: list[Request]) -> None:
        self.inner, self.sent = inner, sent
        self.name = inner.name

    def model_info(self, model: str) -> ModelInfo:
        return self.inner.model_info(model)

    async def complete(self, request: Request, context: CallContext) -> Completion:
        self.sent.append(request)
        return await self.inner.complete(request, context)


def provider_dialect(provider: Adapter) -> str:
    return "openai_chat" if getattr(provider, "api", "") == "chat" else "openai_responses"


async def test_streaming_delivers_text_and_the_same_messages(
    kind: str, served: ServedSim, sleeps: Sleeps
) -> None:
    histories, usages = [], []
    deltas: list[str] = []
    for stream in (False, True):
        key = f"sk-conformance-{uuid.uuid4().hex}"  # a fresh workspace for each run
        async with adapter(kind, served, key, sleeps) as provider:
            session = agent_for(provider, kind).session()
            callbacks = Callbacks(on_text=deltas.append) if stream else None
            result = await session.send("read_file 'plan.md'", callbacks=callbacks)
            result = await session.send("list_files please", callbacks=callbacks)
            histories.append(_without_ids(session.history))
            usages.append([r.usage for r in session.records])
    assert histories[0] == histories[1]
    assert usages[0] == usages[1]
    assert len(deltas) > 2  # the text arrived in pieces
    assert "".join(deltas).endswith(result.text)


async def test_a_fork_first_request_reads_the_parents_whole_prefix(
    provider: Adapter, kind: str, sim: SimServer, key: str
) -> None:
    session = agent_for(provider, kind).session()
    await session.send("read_file 'plan.md'")
    parent = session.records[-1].usage
    fork = session.fork(role="review")
    result = await fork.send("Anything worth remembering?")
    info = provider.model_info(MODELS[kind])
    whole = parent.read + parent.written
    if info.regime == "L":  # implicit caching reads whole grid steps only
        whole = parent.input_total - (parent.input_total - info.min_cacheable) % info.interval
    assert result.records[0].usage.read == whole
    assert result.records[0].explanation.verdict == "hit"
    sent = sim.sent_by(key)
    fork_first = sent[-len(result.records)]
    if kind == "anthropic":
        assert "prompt_cache_key" not in fork_first
    else:  # the lineage shares one key: parent and fork land on the same cache shard
        assert fork_first["prompt_cache_key"] == sent[0]["prompt_cache_key"]
        assert fork_first["prompt_cache_key"].startswith("stoker-")


def _request(model: str, *messages: Message) -> Request:
    prefix = Prefix(params=CacheParams(model=model), system="Be brief.")
    return Request(
        prefix=prefix, messages=messages or (UserMessage(content=(TextBlock(text="hi"),)),)
    )


async def test_an_unknown_model_fails_at_once_naming_it(provider: Adapter, sleeps: Sleeps) -> None:
    with pytest.raises(ProviderError) as caught:
        await provider.complete(_request("model-that-does-not-exist"), CallContext(session_id="t"))
    assert caught.value.status == 404
    assert "'model-that-does-not-exist'" in str(caught.value)
    assert sleeps.waits == []


async def test_a_rejected_request_fails_at_once(
    provider: Adapter, kind: str, sleeps: Sleeps
) -> None:
    call = ToolUseBlock(id="toolu_unanswered", name="read_file", input_json='{"text":"x"}')
    request = _request(
        MODELS[kind],
        UserMessage(content=(TextBlock(text="read it"),)),
        AssistantMessage(content=(call,), stop_reason="tool_use"),
        UserMessage(content=(TextBlock(text="well?"),)),
    )
    with pytest.raises(InvalidRequest) as caught:
        await provider.complete(request, CallContext(session_id="t"))
    assert caught.value.status == 400
    assert "toolu_unanswered" in str(caught.value)
    assert sleeps.waits == []


async def test_three_529s_then_success_is_one_turn_with_three_retries(
    provider: Adapter, kind: str, served: ServedSim, sleeps: Sleeps
) -> None:
    fail_next(served, status=529, count=3, retry_after=0)
    result = await agent_for(provider, kind).session().send("hello")
    assert result.text == "Understood: hello"
    assert [r.retries for r in result.records] == [3]
    assert sleeps.waits == [0.0, 0.0, 0.0]


async def test_rate_limits_wait_as_the_server_asks_also_when_streaming(
    provider: Adapter, kind: str, served: ServedSim, sleeps: Sleeps
) -> None:
    fail_next(served, status=429, count=1, retry_after_ms=1500)
    fail_next(served, status=503, count=1)
    texts: list[str] = []
    result = (
        await agent_for(provider, kind)
        .session()
        .send("hello", callbacks=Callbacks(on_text=texts.append))
    )
    assert "".join(texts) == result.text == "Understood: hello"
    assert result.records[0].retries == 2
    assert sleeps.waits[0] == 1.5
    assert 0.0 <= sleeps.waits[1] <= 1.0  # no hint: full jitter, second backoff step


@pytest.mark.parametrize(
    ("during_stream", "broke"),
    [("before_text", None), ("after_text", "stream broke after text was delivered")],
)
async def test_a_stream_that_breaks_is_retried_only_before_any_text(
    provider: Adapter,
    kind: str,
    served: ServedSim,
    sleeps: Sleeps,
    during_stream: str,
    broke: str | None,
) -> None:
    """A retry would deliver again the text already delivered: after text, a broken
    stream is the caller's error (`broke`)."""
    fail_next(served, status=529, count=1, during_stream=during_stream)
    texts: list[str] = []
    session = agent_for(provider, kind).session()
    sending = session.send("hello", callbacks=Callbacks(on_text=texts.append))
    if broke is None:
        result = await sending
        assert "".join(texts) == result.text == "Understood: hello"
        assert result.records[0].retries == 1
        return
    with pytest.raises(ProviderError, match=broke):
        await sending
    assert texts == ["Understood: hello"]  # delivered once, never repeated by a retry
    assert sleeps.waits == []


async def test_a_rejected_key_fails_at_once_naming_the_provider_never_the_key(
    kind: str, served: ServedSim, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    secret = f"sk-DO-NOT-PRINT-{uuid.uuid4().hex}"
    fail_next(served, status=401, count=1)
    caplog.set_level(logging.DEBUG)
    async with adapter(kind, served, secret, sleeps) as provider:
        with pytest.raises(AuthenticationError) as caught:
            await agent_for(provider, kind).session().send("hello")
    error = caught.value
    assert str(error).startswith(f"{provider.name} rejected the API key (HTTP 401): check ")
    assert error.provider == provider.name
    assert sleeps.waits == []
    shown = "".join(traceback.format_exception(error)) + repr(error)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert secret not in shown
    assert secret not in logged
    assert any(r.name.startswith(("anthropic", "openai", "httpx")) for r in caplog.records)


async def test_anthropic_thinking_is_replayed_verbatim_and_writes_split_by_ttl(
    served: ServedSim, sim: SimServer, key: str, sleeps: Sleeps
) -> None:
    async with adapter("anthropic", served, key, sleeps) as provider:
        agent = replace(
            agent_for(provider, "anthropic"),
            thinking_budget=2048,
            cache_policy=CachePolicy(system_ttl="1h"),
        )
        session = agent.session()
        result = await session.send(
            "read_file 'plan.md'", callbacks=Callbacks(on_text=lambda _: None)
        )
    thinking = [
        b
        for m in session.history
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ThinkingBlock)
    ]
    assert len(thinking) == 2
    assert all(b.signature for b in thinking)
    first, second = result.records
    assert first.usage.written_1h > 1024  # tools + system, written for an hour
    assert first.usage.written_5m > 0  # the rolling breakpoint on the conversation
    assert second.explanation.verdict == "hit"
    sent = sim.sent_by(key)[-1]["messages"]
    replayed = [b for m in sent for b in m["content"] if b["type"] == "thinking"]
    assert [(b["thinking"], b["signature"]) for b in replayed] == [
        (b.thinking, b.signature) for b in thinking[:1]
    ]


async def test_anthropic_long_requests_stream_because_the_sdk_requires_it(
    served: ServedSim, sim: SimServer, key: str, sleeps: Sleeps
) -> None:
    async with adapter("anthropic", served, key, sleeps) as provider:
        agent = replace(agent_for(provider, "anthropic"), max_tokens=64_000)
        result = await agent.session().send("hello")
    assert result.text == "Understood: hello"
    assert sim.sent_by(key)[-1]["stream"] is True
