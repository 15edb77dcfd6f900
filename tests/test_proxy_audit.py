"""`stoker proxy` in audit mode, driven by the official SDKs against `stoker sim serve`.

Every conversation runs twice, through the proxy and directly against a second,
identical simulator: the responses must be the same bytes, the upstream must receive
the same bodies, and the store must hold each call's usage, grouped into lineages by
the hash chain of the messages. The client's key reaches the upstream and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from stoker.proxy.capture import response_body
from stoker.proxy.routes import tenant_of
from stoker.store.sqlite import SQLiteStore
from stoker.wire.dialects import dialect_module
from stoker.wire.exchange import Exchange, LineageSummary
from tests.proxy_helpers import RECORDING, SYSTEM, TOOLS, Behind, behind_proxy


@pytest.fixture(params=RECORDING)
def behind(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Behind]:
    with behind_proxy(tmp_path, recording=request.param) as b:
        yield b


def _key() -> str:
    return f"sk-test-{uuid.uuid4().hex}"


def _follow(args: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    """The history after a response: the assistant's content, and a result per tool call."""
    history = [*args["messages"], {"role": "assistant", "content": body["content"]}]
    results = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "def main(): pass"}
        for b in body["content"]
        if b["type"] == "tool_use"
    ]
    if results:
        history.append({"role": "user", "content": results})
    return history


class Claude:
    """A three-call conversation (a tool call, the answer after its result, a follow-up)
    with the Anthropic SDK, stepped one call at a time so two can interleave."""

    def __init__(self, opener: str) -> None:
        self.texts = [f"{opener}: read the file 'app.py'", None, "Thanks. Anything else?"]
        self.history: list[dict[str, Any]] = []
        self.raw: list[bytes] = []

    def args(self) -> dict[str, Any]:
        text = self.texts[len(self.raw)]
        extra = [{"role": "user", "content": text}] if text else []
        return {
            "model": "claude-sonnet-4-6",
            "max_tokens": 256,
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": [*self.history, *extra],
        }

    def step(self, client: anthropic.Anthropic, *, stream: bool = False) -> None:
        args = self.args()
        if stream:
            with client.messages.with_streaming_response.create(**args, stream=True) as r:
                data = b"".join(r.iter_bytes())
        else:
            data = client.messages.with_raw_response.create(**args).http_response.content
        self.raw.append(data)
        self.history = _follow(args, response_body("anthropic", data, streamed=stream))

    async def astep(self, client: anthropic.AsyncAnthropic) -> None:
        args = self.args()
        response = await client.messages.with_raw_response.create(**args)
        self.raw.append(response.http_response.content)
        self.history = _follow(args, (await response.parse()).model_dump())


async def _read(db: Path) -> tuple[list[LineageSummary], dict[str, list[Exchange]]]:
    async with SQLiteStore(db) as store:
        lineages = await store.proxy_lineages()
        return lineages, {x.id: await store.proxy_calls(x.id) for x in lineages}


def _usages(dialect: str, raw: list[bytes], *, streamed: bool = False) -> list[Any]:
    module = dialect_module(dialect)
    return [module.parse_response(response_body(dialect, r, streamed=streamed))[1] for r in raw]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_sdk_passes_byte_for_byte_and_the_usage_is_recorded(
    behind: Behind, stream: bool
) -> None:
    key = _key()
    with (
        anthropic.Anthropic(base_url=behind.url, api_key=key, max_retries=0) as proxied,
        anthropic.Anthropic(base_url=behind.direct, api_key=key, max_retries=0) as direct,
    ):
        through, plain = Claude("Review"), Claude("Review")
        for _ in range(3):
            through.step(proxied, stream=stream)
            plain.step(direct, stream=stream)
    assert through.raw == plain.raw
    assert behind.sim.sent_by(key) == behind.direct_sim.sent_by(key)
    behind.recorded()
    lineages, calls = asyncio.run(_read(behind.db))
    assert [(x.calls, x.tenant, x.parent_id) for x in lineages] == [(3, tenant_of(key), None)]
    recorded = calls[lineages[0].id]
    assert [c.record.usage for c in recorded if c.record] == _usages(
        "anthropic", through.raw, streamed=stream
    )
    assert [c.stream for c in recorded] == [stream] * 3
    # No breakpoints sent: each call's explanation says so, in the explainer's words.
    assert {c.record.explanation.verdict for c in recorded if c.record} == {"no_breakpoint"}
    assert "no cache breakpoint" in recorded[1].record.explanation.detail  # type: ignore[union-attr]


def test_interleaved_conversations_with_one_system_prompt_are_two_lineages(
    behind: Behind,
) -> None:
    key = _key()
    a, b = Claude("Review the service"), Claude("Summarise the changelog")
    with anthropic.Anthropic(base_url=behind.url, api_key=key, max_retries=0) as client:
        for _ in range(3):
            a.step(client)
            b.step(client, stream=True)
    behind.recorded()
    lineages, calls = asyncio.run(_read(behind.db))
    by_title = {x.title: calls[x.id] for x in lineages}
    assert sorted(by_title) == [
        "Review the service: read the file 'app.py'",
        "Summarise the changelog: read the file 'app.py'",
    ]
    for title, conversation in (
        ("Review the service: read the file 'app.py'", a),
        ("Summarise the changelog: read the file 'app.py'", b),
    ):
        recorded = by_title[title]
        assert [c.seq for c in recorded] == [0, 1, 2]
        assert [c.messages_from for c in recorded] == [0, 1, 3]
        streamed = conversation is b
        assert [c.record.usage for c in recorded if c.record] == _usages(
            "anthropic", conversation.raw, streamed=streamed
        )


def test_async_anthropic_sdk_passes_byte_for_byte(behind: Behind) -> None:
    key = _key()

    async def run(url: str) -> list[bytes]:
        convo = Claude("Review")
        async with anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0) as c:
            for _ in range(3):
                await convo.astep(c)
        return convo.raw

    assert asyncio.run(run(behind.url)) == asyncio.run(run(behind.direct))
    behind.recorded()
    lineages, _ = asyncio.run(_read(behind.db))
    assert [x.calls for x in lineages] == [3]


def _chat(client: openai.OpenAI, stream: bool) -> list[bytes]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    raw: list[bytes] = []
    for text in ("Is this diff safe?", "And the tests?"):
        messages.append({"role": "user", "content": text})
        args: dict[str, Any] = {"model": "gpt-5.5", "messages": messages}
        if stream:
            args |= {"stream": True, "stream_options": {"include_usage": True}}
            with client.chat.completions.with_streaming_response.create(**args) as r:
                data = b"".join(r.iter_bytes())
        else:
            data = client.chat.completions.with_raw_response.create(**args).http_response.content
        raw.append(data)
        body = response_body("openai_chat", data, streamed=stream)
        messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})
    return raw


def _responses(client: openai.OpenAI, stream: bool) -> list[bytes]:
    items: list[dict[str, Any]] = []
    raw: list[bytes] = []
    for text in ("Is this diff safe?", "And the tests?"):
        items.append({"role": "user", "content": text})
        args: dict[str, Any] = {"model": "gpt-5.5", "instructions": SYSTEM, "input": items}
        if stream:
            with client.responses.with_streaming_response.create(**args, stream=True) as r:
                data = b"".join(r.iter_bytes())
        else:
            data = client.responses.with_raw_response.create(**args).http_response.content
        raw.append(data)
        items += response_body("openai_responses", data, streamed=stream)["output"]
    return raw


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", ["openai_chat", "openai_responses"])
def test_openai_sdk_passes_byte_for_byte_and_the_usage_is_recorded(
    behind: Behind, api: str, stream: bool
) -> None:
    key = _key()
    run = _chat if api == "openai_chat" else _responses
    with (
        openai.OpenAI(base_url=behind.openai_url, api_key=key, max_retries=0) as proxied,
        openai.OpenAI(base_url=behind.direct + "/v1", api_key=key, max_retries=0) as direct,
    ):
        through, plain = run(proxied, stream), run(direct, stream)
    assert _stable(through) == _stable(plain)
    behind.recorded()
    lineages, calls = asyncio.run(_read(behind.db))
    assert [(x.calls, x.dialect) for x in lineages] == [(2, api)]
    recorded = calls[lineages[0].id]
    assert [c.record.usage for c in recorded if c.record] == _usages(api, through, streamed=stream)
    assert recorded[1].record.usage.read > 0  # type: ignore[union-attr]


def _stable(raw: list[bytes]) -> list[bytes]:
    """OpenAI bodies carry a `created` time of the serving process: the one field two
    simulators may differ in by a second. Everything else must match byte for byte."""
    out = []
    for data in raw:
        text = data.decode()
        out.append(json.dumps(_no_created(text)).encode() if text.startswith("{") else data)
    return [_sse_no_created(d) for d in out]


def _no_created(text: str) -> Any:
    value = json.loads(text)
    value.pop("created", None)
    value.pop("created_at", None)
    return value


def _sse_no_created(data: bytes) -> bytes:
    import re

    return re.sub(rb'"created(_at)?":\d+(\.\d+)?', b'"created":0', data)


def test_the_key_never_reaches_the_store_or_the_logs(
    behind: Behind, caplog: pytest.LogCaptureFixture
) -> None:
    key = _key()
    caplog.set_level(logging.DEBUG)
    with anthropic.Anthropic(base_url=behind.url, api_key=key, max_retries=0) as client:
        convo = Claude("Review")
        for _ in range(3):
            convo.step(client, stream=True)
    with openai.OpenAI(base_url=behind.openai_url, api_key=key, max_retries=0) as client:
        _chat(client, stream=False)
    behind.recorded()
    stored = b"".join(p.read_bytes() for p in behind.db.parent.glob("proxy.db*"))
    assert key.encode() not in stored
    assert tenant_of(key).encode() in stored
    assert key not in caplog.text
    assert behind.sim.sent_by(key)  # it did reach the upstream
