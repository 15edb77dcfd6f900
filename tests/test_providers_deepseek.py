"""DeepSeek: its disk cache of prefix units (each rule a vector of docs/provider-caching.md,
"DeepSeek"), `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`, and the README's
example through the `openai` SDK against `stoker sim serve` and in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker.cache.accounting.implicit import ImplicitAccountant, ImplicitSettings
from stoker.cache.models import model_info
from stoker.cache.planner import plan
from stoker.cache.time_policy import lifetimes
from stoker.config import Config
from stoker.providers.compat import DeepSeekProvider
from stoker.wire.blocks import TextBlock
from stoker.wire.dialects import deepseek
from stoker.wire.messages import UserMessage
from stoker.wire.usage import Usage
from tests.provider_rigs import (
    in_process_example,
    loopback_keeps_secrets,
    served_example,
)

KEY = "sk-deepseek-test-91b2"
INFO = model_info("deepseek-chat")
A = "The quarterly report says revenue grew in every region we serve. " * 40
B = "Summarise the key figures. " * 3
C = "What about the costs? " * 3
D = "And the outlook for next year? " * 3


def body(*users: str) -> dict[str, Any]:
    """A conversation: each text a user message, answered by a short assistant one."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a financial analyst."}]
    for i, text in enumerate(users):
        if i:
            messages.append({"role": "assistant", "content": "Noted."})
        messages.append({"role": "user", "content": text})
    return {"model": "deepseek-chat", "messages": messages}


def one_message(text: str) -> dict[str, Any]:
    return {"model": "deepseek-chat", "messages": [{"role": "user", "content": text}]}


def accountant() -> ImplicitAccountant:
    return ImplicitAccountant(ImplicitSettings(mode="units"))


def test_d1_a_longer_conversation_reads_the_previous_requests_unit() -> None:
    cache = accountant()
    first = cache.account(body(A + B), INFO, at=0.0)
    second = cache.account(body(A + B, C), INFO, at=5.0)
    end = first.usage.input_total - 3  # the reply's priming is no input
    assert first.usage == Usage(uncached=first.usage.input_total)
    assert second.usage.read == end // 64 * 64  # stored in whole 64-token units


def test_d2_a_shared_prefix_is_persisted_when_detected_and_read_the_next_time() -> None:
    cache = accountant()
    cache.account(one_message(A + B), INFO, at=0.0)
    second = cache.account(one_message(A + C), INFO, at=5.0)  # A+C: no unit matches whole
    third = cache.account(one_message(A + D), INFO, at=10.0)  # A was persisted: read
    assert second.usage.read == 0
    assert 0 < third.usage.read <= len(A)  # about A's tokens, in 64-token units
    assert third.usage.read % 64 == 0


def test_d3_under_one_unit_nothing_is_cached() -> None:
    cache = accountant()
    cache.account(one_message("hi"), INFO, at=0.0)
    again = cache.account(one_message("hi"), INFO, at=1.0)
    assert again.usage.read == 0
    assert again.misses[0].cause == "below_minimum"


def test_d4_an_unused_unit_lives_the_assumed_hours() -> None:
    cache = accountant()
    cache.account(body(A + B), INFO, at=0.0)
    assert cache.account(body(A + B, C), INFO, at=3 * 3600 - 1).usage.read > 0
    late = cache.account(body(A + B, C, D), INFO, at=3 * 3600 - 1 + 3 * 3600 + 1)
    assert late.usage.read == 0
    assert late.misses[0].cause == "expired"


def test_usage_fields_and_the_rules_the_planner_and_time_policy_read() -> None:
    usage = Usage(uncached=100, read=6400, output=7)
    fields = deepseek.usage_fields(usage)
    assert (fields["prompt_cache_hit_tokens"], fields["prompt_cache_miss_tokens"]) == (6400, 100)
    assert (
        deepseek.parse_response(
            {
                "id": "x",
                "choices": [{"message": {"role": "assistant", "content": "ok"}}],
                "usage": {**fields, "prompt_tokens_details": None},
            }
        )[1]
        == usage
    )
    messages = [UserMessage(content=(TextBlock(text="hi"),))]
    assert plan(INFO, messages, previous=None).breakpoints == ()  # automatic: no markers
    assert lifetimes(INFO) is None  # no TTL a request chooses: no keep-warm


def config(url: str) -> Config:
    return Config.from_env({"DEEPSEEK_API_KEY": KEY, "DEEPSEEK_BASE_URL": url + "/deepseek"})


async def test_readme_example_through_the_openai_sdk_against_the_served_simulator() -> None:
    _, sent = await served_example("deepseek:deepseek-chat", config)
    assert "max_tokens" in sent
    assert "prompt_cache_key" not in sent


async def test_readme_example_on_the_in_process_simulator() -> None:
    await in_process_example("deepseek-chat")


async def test_the_sdk_talks_to_loopback_and_the_key_reaches_no_log_record_or_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen = await loopback_keeps_secrets("deepseek:deepseek-chat", config, (KEY,), tmp_path, caplog)
    assert isinstance(seen.provider, DeepSeekProvider)
    assert seen.provider.base_url == seen.url + "/deepseek"
