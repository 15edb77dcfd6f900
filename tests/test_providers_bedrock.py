"""Claude on Bedrock: the Converse dialect, Bedrock's cache rules (each a vector of
docs/provider-caching.md, "Bedrock"), and the README's example through the AWS SDK
(aiobotocore) against `stoker sim serve` and on the in-process simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.eventstream import EventStreamBuffer

from stoker import Agent
from stoker.cache.accounting.bedrock import BedrockAccountant
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy, plan
from stoker.cache.time_policy import lifetimes
from stoker.config import Config
from stoker.errors import InvalidRequest
from stoker.providers.bedrock import BedrockProvider
from stoker.providers.select import select_provider
from stoker.wire.blocks import TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.dialects import bedrock, bedrock_stream
from stoker.wire.messages import AssistantMessage, UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Breakpoint, Request
from stoker.wire.usage import Usage
from tests.provider_rigs import (
    SYSTEM,
    in_process_example,
    loopback_keeps_secrets,
    served_example,
    served_sim,
    word_count,
)

SONNET = "anthropic.claude-sonnet-4-5-20250929-v1:0"
KEY_ID, SECRET, TOKEN = "AKIATESTBEDROCK0001", "bedrock-secret-3f9a1c", "bedrock-token-77e2"


def config(url: str, key_id: str = KEY_ID) -> Config:
    return Config.from_env(
        {
            "AWS_ACCESS_KEY_ID": key_id,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": TOKEN,
            "AWS_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url,
        }
    )


def body(
    system: int, *turns: tuple[str, int], marks: dict[int, str] | None = None
) -> dict[str, Any]:
    """A Converse body: a system prompt of `system` words, messages of words, and cache
    points after the system (key -1) or message i."""
    marks = marks or {}
    out: dict[str, Any] = {"modelId": SONNET, "inferenceConfig": {"maxTokens": 100}}
    out["system"] = [{"text": "x " * system}]
    if -1 in marks:
        out["system"].append({"cachePoint": {"type": "default", "ttl": marks[-1]}})
    out["messages"] = []
    for i, (role, words) in enumerate(turns):
        content: list[dict[str, Any]] = [{"text": "y " * words}]
        if i in marks:
            content.append({"cachePoint": {"type": "default", "ttl": marks[i]}})
        out["messages"].append({"role": role, "content": content})
    return out


# --- the dialect ------------------------------------------------------------------------


def test_breakpoints_become_cache_points_after_their_blocks() -> None:
    prefix = Prefix(params=CacheParams(model=SONNET), system="be brief")
    messages = (
        UserMessage(content=(TextBlock(text="hi"),)),
        AssistantMessage(content=(ToolUseBlock(id="t1", name="f", input_json='{"b":1,"a":2}'),)),
        UserMessage(content=(ToolResultBlock(tool_use_id="t1", content="ok"),)),
    )
    marks = (Breakpoint(message=None, ttl="1h"), Breakpoint(message=2, block=0, ttl="5m"))
    payload = bedrock.render_request(Request(prefix=prefix, messages=messages, breakpoints=marks))
    assert payload["system"] == [
        {"text": "be brief"},
        {"cachePoint": {"type": "default", "ttl": "1h"}},
    ]
    assert payload["messages"][2]["content"][1] == {"cachePoint": {"type": "default"}}
    assert list(payload["messages"][1]["content"][0]["toolUse"]["input"]) == ["b", "a"]
    claude = bedrock.anthropic_equivalent(payload)
    assert claude["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert claude["messages"][2]["content"][0]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "5m",
    }


def test_usage_maps_converse_fields_and_splits_writes_by_ttl() -> None:
    usage = Usage(uncached=12, written_5m=300, written_1h=1500, read=2000, output=40)
    fields = bedrock.usage_fields(usage)
    assert fields["cacheDetails"] == [
        {"ttl": "1h", "inputTokens": 1500},
        {"ttl": "5m", "inputTokens": 300},
    ]
    assert fields["totalTokens"] == 12 + 1800 + 2000 + 40
    assert bedrock.parse_usage(fields) == usage


def test_stream_frames_are_the_event_stream_botocore_reads() -> None:
    message = AssistantMessage(content=(TextBlock(text="hello there"),), stop_reason="end_turn")
    body = bedrock.render_response(message, Usage(uncached=5, output=2), SONNET)
    buffer = EventStreamBuffer()
    for frame in bedrock_stream.frames(body):
        buffer.add_data(frame)
    events = [(m.headers[":event-type"], json.loads(m.payload)) for m in buffer]
    assert events[0] == ("messageStart", {"role": "assistant"})
    accumulator = bedrock_stream.Accumulator()
    for kind, payload in events:
        accumulator.feed({kind: payload})
    assert bedrock.parse_response(accumulator.body())[0].text == "hello there"


# --- Bedrock's rules ------------------------------------------------------------------


def test_b1_a_cache_point_writes_and_the_next_request_reads_it() -> None:
    accountant = BedrockAccountant()
    first = accountant.account(body(1200, ("user", 50), marks={0: "5m"}), at=0.0)
    second = accountant.account(
        body(1200, ("user", 50), ("assistant", 20), ("user", 30), marks={2: "5m"}), at=10.0
    )
    assert (first.usage.read, first.usage.written_5m) == (0, first.usage.input_total)
    assert second.usage.read == first.usage.input_total


def test_b2_below_the_models_minimum_nothing_is_cached() -> None:
    haiku = body(1000, ("user", 50), marks={0: "5m"})  # Haiku 4.5 on Bedrock: 4,096
    haiku["modelId"] = "anthropic.claude-haiku-4-5-20251001-v1:0"
    outcome = BedrockAccountant().account(haiku, at=0.0)
    assert (outcome.usage.read, outcome.usage.written) == (0, 0)
    assert outcome.misses[0].cause == "below_minimum"


def test_b3_a_one_hour_ttl_is_refused_on_a_model_that_offers_five_minutes() -> None:
    sonnet_4 = body(1200, ("user", 50), marks={-1: "1h"})
    sonnet_4["modelId"] = "anthropic.claude-sonnet-4-20250514-v1:0"
    with pytest.raises(InvalidRequest, match="'1h' is not supported"):
        BedrockAccountant().account(sonnet_4, at=0.0)


def test_b4_at_most_four_cache_points() -> None:
    many = body(
        1200,
        *[("user" if i % 2 == 0 else "assistant", 30) for i in range(5)],
        marks={i: "5m" for i in range(5)},
    )
    with pytest.raises(InvalidRequest, match="maximum of 4 cache points"):
        BedrockAccountant().account(many, at=0.0)


def test_b5_five_minute_entries_expire_and_one_hour_entries_do_not() -> None:
    accountant = BedrockAccountant()
    accountant.account(body(1200, ("user", 50), marks={-1: "1h", 0: "5m"}), at=0.0)
    later = accountant.account(body(1200, ("user", 50), marks={-1: "1h", 0: "5m"}), at=400.0)
    assert 0 < later.usage.read < later.usage.input_total  # the system's 1h entry only
    assert later.misses[0].cause == "expired"


def test_planner_and_time_policy_read_bedrocks_ttls() -> None:
    short_only = model_info("anthropic.claude-sonnet-4-20250514-v1:0")
    messages = [UserMessage(content=(TextBlock(text="hi"),))]
    policy = CachePolicy(system_ttl="1h")
    assert {
        b.ttl for b in plan(short_only, messages, previous=None, policy=policy).breakpoints
    } == {"5m"}
    menu = lifetimes(short_only)
    assert menu is not None
    assert menu.long == menu.short == 300.0
    assert lifetimes(model_info(SONNET)) is not None
    assert model_info(SONNET).min_output == 1  # a keep-warm asks for one token


def test_telemetry_names_the_provider_as_the_genai_conventions_do() -> None:
    from stoker.agent.otel import provider_name

    assert (provider_name("bedrock"), provider_name("deepseek")) == ("aws.bedrock", "deepseek")


# --- through the AWS SDK and on the in-process simulator -------------------------------


async def test_readme_example_through_the_aws_sdk_against_the_served_simulator() -> None:
    _, sent = await served_example(f"bedrock:us.{SONNET}", config)
    assert {"cachePoint": {"type": "default"}} in sent["messages"][-1]["content"]


async def test_streamed_turns_come_over_the_binary_event_stream() -> None:
    with served_sim() as served:
        provider = select_provider(f"bedrock:{SONNET}", config=config(served.url)).provider
        async with Agent(SONNET, provider=provider, tools=[word_count], system=SYSTEM) as agent:
            session = agent.session()
            pieces: list[str] = []
            from stoker import TextDelta, TurnDone

            async for event in session.stream("word count of 'a b c'"):
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                elif isinstance(event, TurnDone):
                    done = event.result
    assert pieces
    assert done.records[-1].usage.read > 0


async def test_readme_example_on_the_in_process_simulator() -> None:
    await in_process_example(SONNET)


async def test_the_sdk_talks_to_loopback_and_the_keys_reach_no_log_record_or_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen = await loopback_keeps_secrets(
        f"bedrock:{SONNET}",
        config,
        (SECRET, TOKEN),
        tmp_path,
        caplog,
        refused_key="AKIASOMEONEELSE00001",
    )
    assert isinstance(seen.provider, BedrockProvider)
    assert seen.provider.base_url == seen.url
    stoker_logs = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("stoker"))
    assert KEY_ID not in stoker_logs
    assert KEY_ID not in seen.shown
