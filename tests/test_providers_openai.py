"""The OpenAI adapter against servers that answer like vLLM and llama.cpp, and its cache options.

A small stand-in server returns each engine's usage shape (docs/provider-caching.md,
"OpenAI-compatible servers") and keeps what it received, so the tests see both
directions of the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from stoker.providers.base import CallContext
from stoker.providers.openai import QUIRKS, OpenAIProvider
from stoker.providers.sim.server import ServedSim, serve_in_background
from stoker.wire.blocks import TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from stoker.wire.usage import Usage

ANSWER = {"role": "assistant", "content": "ok"}
USAGES: dict[str, dict[str, Any]] = {
    # vLLM without --enable-prompt-tokens-details: no details at all
    "vllm-bare": {"usage": {"prompt_tokens": 3000, "completion_tokens": 2, "total_tokens": 3002}},
    # some vLLM versions send the object with a null count
    "vllm-null": {
        "usage": {
            "prompt_tokens": 3000,
            "completion_tokens": 2,
            "total_tokens": 3002,
            "prompt_tokens_details": {"cached_tokens": None},
        }
    },
    # older llama-server builds: reuse only in timings.cache_n
    "llama": {
        "usage": {"prompt_tokens": 3000, "completion_tokens": 2, "total_tokens": 3002},
        "timings": {"cache_n": 2880, "prompt_n": 120},
    },
}


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[ServedSim, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    async def chat(request: HttpRequest) -> JSONResponse:
        payload = await request.json()
        received.append(payload)
        shape = USAGES[payload["model"]]
        choice = {"index": 0, "message": ANSWER, "finish_reason": "stop"}
        return JSONResponse({"id": "c1", "object": "chat.completion", "choices": [choice], **shape})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve_in_background(app) as served:
        yield served, received


def _request(model: str, **extra: Any) -> Request:
    return Request(
        prefix=Prefix(params=CacheParams(model=model), system="Be brief."),
        messages=(UserMessage(content=(TextBlock(text="hi"),)),),
        cache_key="stoker-lineage",
        **extra,
    )


@pytest.mark.parametrize("model", ["vllm-bare", "vllm-null"])
async def test_vllm_without_cached_tokens_reads_zero_and_says_how_to_see_them(
    engines: tuple[ServedSim, list[dict[str, Any]]], model: str
) -> None:
    served, received = engines
    async with OpenAIProvider(
        api_key="EMPTY", api="chat", base_url=served.openai_url, quirks=QUIRKS["vllm"]
    ) as provider:
        completion = await provider.complete(_request(model), CallContext(session_id="t"))
    assert completion.usage == Usage(uncached=3000, output=2)
    (fact,) = completion.facts
    assert fact[0] == "unreported"
    assert "--enable-prompt-tokens-details" in fact[1]
    assert "prompt_cache_key" not in received[-1]  # meaningless to vLLM, so not sent


async def test_llama_cpp_reuse_is_read_from_timings(
    engines: tuple[ServedSim, list[dict[str, Any]]],
) -> None:
    served, _ = engines
    async with OpenAIProvider(
        api_key="EMPTY", api="chat", base_url=served.openai_url, quirks=QUIRKS["llama.cpp"]
    ) as provider:
        completion = await provider.complete(_request("llama"), CallContext(session_id="t"))
    assert completion.usage == Usage(uncached=120, read=2880, output=2)
    assert completion.facts == ()


async def test_cache_key_and_retention_are_sent_where_they_mean_something(
    engines: tuple[ServedSim, list[dict[str, Any]]],
) -> None:
    served, received = engines
    async with OpenAIProvider(
        api_key="k", api="chat", base_url=served.openai_url, cache_retention="24h"
    ) as provider:
        await provider.complete(_request("llama"), CallContext(session_id="t"))
        assert received[-1]["prompt_cache_key"] == "stoker-lineage"
        assert received[-1]["prompt_cache_retention"] == "24h"
        # a retention the request states itself wins over the adapter's default
        request = _request("llama", cache_retention="in_memory")
        await provider.complete(request, CallContext(session_id="t"))
        assert received[-1]["prompt_cache_retention"] == "in_memory"
