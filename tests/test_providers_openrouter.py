"""OpenRouter: `cache_control` passed through to Claude, sticky routing to the upstream
that holds a conversation's cache (each a vector of docs/provider-caching.md,
"OpenRouter"), its usage and cost fields, and the README's example through the `openai`
SDK against `stoker sim serve` and on the in-process simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from stoker import Agent
from stoker.cache.accounting.openrouter import OpenRouterAccountant
from stoker.config import Config
from stoker.providers.compat import OpenRouterProvider
from stoker.providers.select import select_provider
from stoker.providers.sim._http import Failure
from stoker.wire.blocks import TextBlock
from stoker.wire.dialects import openrouter
from stoker.wire.messages import UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Breakpoint, Request
from tests.provider_rigs import (
    SYSTEM,
    in_process_example,
    loopback_keeps_secrets,
    served_example,
    served_sim,
)

CLAUDE = "anthropic/claude-sonnet-4.6"
KEY = "sk-or-v1-test-5c0ffee"


def config(url: str) -> Config:
    return Config.from_env(
        {"OPENROUTER_API_KEY": KEY, "OPENROUTER_BASE_URL": url + "/openrouter/api/v1"}
    )


def chat(*, user: str, session: str | None = None, **extra: Any) -> dict[str, Any]:
    """An OpenRouter body: a long system prompt marked for the cache, one user message."""
    system = {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    body: dict[str, Any] = {
        "model": CLAUDE,
        "max_tokens": 100,
        "messages": [
            {"role": "system", "content": [system]},
            {"role": "user", "content": [{"type": "text", "text": user}]},
        ],
        **extra,
    }
    if session is not None:
        body["session_id"] = session
    return body


def test_breakpoints_are_cache_control_and_the_key_is_the_session_id() -> None:
    prefix = Prefix(params=CacheParams(model=CLAUDE), system="be brief")
    request = Request(
        prefix=prefix,
        messages=(UserMessage(content=(TextBlock(text="hi"),)),),
        breakpoints=(Breakpoint(message=None, ttl="1h"), Breakpoint(message=0, block=0)),
        cache_key="stoker-abc",
    )
    body = openrouter.render_request(request)
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert (body["session_id"], body["usage"], body["max_tokens"]) == (
        "stoker-abc",
        {"include": True},
        4096,
    )
    assert "prompt_cache_key" not in body
    claude = openrouter.anthropic_equivalent(body)
    assert claude["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_r1_a_session_sticks_to_its_upstream_from_its_first_request() -> None:
    router = OpenRouterAccountant()
    first = router.account(chat(user="one", session="s1"), at=0.0)
    second = router.account(chat(user="one", session="s1"), at=30.0)
    assert first.endpoint == second.endpoint
    assert second.outcome.usage.read > 0


def test_r2_without_a_key_turns_are_load_balanced_and_a_reroute_is_a_named_miss() -> None:
    router = OpenRouterAccountant()
    first = router.account(chat(user="one"), at=0.0)  # no read yet: nothing sticks
    second = router.account(chat(user="one"), at=30.0)
    assert first.endpoint != second.endpoint
    assert second.outcome.usage.read == 0
    assert second.outcome.misses[0].cause == "rerouted"
    assert second.outcome.misses[0].where == second.endpoint


def test_r3_provider_order_names_the_upstream_and_sticky_sessions_end_after_ten_minutes() -> None:
    router = OpenRouterAccountant()
    ordered = router.account(chat(user="x", provider={"order": ["Google"]}), at=0.0)
    assert ordered.endpoint == "Google"
    first = router.account(chat(user="one", session="s"), at=0.0)
    held = router.account(chat(user="one", session="s"), at=599.0)  # each request renews it
    gone = router.account(chat(user="one", session="s"), at=599.0 + 601.0)
    assert held.endpoint == first.endpoint
    assert gone.endpoint != first.endpoint


def test_r4_an_openai_model_gets_explicit_breakpoints_for_its_markers() -> None:
    body = chat(user="one", session="s")
    body["model"] = "openai/gpt-5.6"
    sent = openrouter.openai_equivalent(body)
    part = sent["messages"][0]["content"][0]
    assert part["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert "cache_control" not in part
    assert "session_id" not in sent
    assert "usage" not in sent
    router = OpenRouterAccountant()
    router.account(body, at=0.0)
    assert router.account(body, at=10.0).outcome.usage.read > 0


async def test_usage_carries_cache_writes_and_the_cost_the_record_keeps() -> None:
    with served_sim() as served:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=served.url + "/openrouter/api/v1")
        sent = chat(user="hi", session="s")
        own = {k: sent.pop(k) for k in ("session_id",)}
        raw = await client.chat.completions.with_raw_response.create(**sent, extra_body=own)
        body = await raw.http_response.aread()
        await client.close()
    answer = json.loads(body)
    details = answer["usage"]["prompt_tokens_details"]
    assert details["cache_write_tokens"] > 0
    assert details["cached_tokens"] == 0
    assert answer["usage"]["cost"] > 0
    assert answer["provider"] in ("Anthropic", "Amazon Bedrock", "Google")
    assert openrouter.reported_cost(answer) == answer["usage"]["cost"]


async def test_readme_example_through_the_openai_sdk_against_the_served_simulator() -> None:
    example, _ = await served_example(f"openrouter:{CLAUDE}", config)
    assert all(r.cost_usd is not None and r.cost_usd > 0 for r in example.turns[0])


async def test_readme_example_on_the_in_process_simulator() -> None:
    await in_process_example(CLAUDE)


async def test_the_sdk_talks_to_loopback_and_the_key_reaches_no_log_record_or_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen = await loopback_keeps_secrets(f"openrouter:{CLAUDE}", config, (KEY,), tmp_path, caplog)
    assert isinstance(seen.provider, OpenRouterProvider)
    assert seen.provider.base_url == seen.url + "/openrouter/api/v1"


async def test_a_turn_falls_back_from_bedrock_to_openrouter_as_a_declared_break() -> None:
    from stoker.agent.fallback import Route
    from stoker.providers.bedrock import BedrockProvider
    from stoker.providers.retry import RetryPolicy

    with served_sim() as served:
        bedrock = BedrockProvider(
            region="us-east-1",
            access_key_id="AKIAFALLBACK00000001",
            secret_access_key="s",
            base_url=served.url,
            retry=RetryPolicy(max_retries=0),
        )
        spare = select_provider(f"openrouter:{CLAUDE}", config=config(served.url)).provider
        route = Route(provider=spare, model=CLAUDE, spec=f"openrouter:{CLAUDE}")
        model = "anthropic.claude-sonnet-4-5-20250929-v1:0"
        async with Agent(model, provider=bedrock, fallbacks=[route], system=SYSTEM) as agent:
            served.app.state.sim.ledger.pending.append(Failure(status=503))
            result = await agent.session().send("hello")
    (call,) = result.records
    assert call.provider == "openrouter"
    assert call.fallback_of == model
    assert call.explanation.verdict == "declared"
