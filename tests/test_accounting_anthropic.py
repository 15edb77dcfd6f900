"""Anthropic cache accounting against the worked examples T1-T11 of
docs/provider-caching.md, "Anthropic simulator".

Model claude-sonnet-4-6 (minimum 1,024), tools 2,000 tokens in one block, system 1,000
tokens in one block, unless a test says otherwise.
"""

from __future__ import annotations

import dataclasses

import pytest

from stoker.cache import accounting
from stoker.cache.accounting import (
    AnthropicAccountant,
    AnthropicSettings,
    CacheBreakpoint,
    CacheEntry,
    MissFact,
)
from stoker.cache.accounting import anthropic as anthropic_module
from stoker.cache.models import model_info
from stoker.errors import InvalidRequest
from stoker.wire.dialects import anthropic
from stoker.wire.usage import Usage
from tests.accounting_helpers import (
    assistant,
    body,
    marker,
    pad,
    text,
    tool,
    tool_result,
    tool_use,
    user,
)


def turn1() -> dict:
    return body(user(text(50)))


def turn2(**extra: object) -> dict:
    return body(user(text(50)), assistant(text(200)), user(text(60)), **extra)


def clock_system(second: int) -> list[dict]:
    return [text(1000, prefix=f"Current time: 2026-10-01 12:00:{second:02d}. ")]


def test_t1_automatic_caching_writes_the_whole_prefix() -> None:
    outcome = AnthropicAccountant().account(turn1(), at=0.0)
    assert outcome.usage == Usage(written_5m=3050)
    assert outcome.breakpoints == (CacheBreakpoint(index=2, ttl="5m", tokens=3050),)
    assert (outcome.total_tokens, outcome.blocks, outcome.hit_index) == (3050, 3, None)


def test_t2_lookback_finds_the_previous_turn_two_positions_back() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0)
    outcome = acc.account(turn2(), at=10.0)
    assert outcome.usage == Usage(read=3050, written_5m=260)
    assert outcome.hit_index == 2
    assert outcome.misses == ()


def test_t3_timestamp_in_system_rewrites_every_turn() -> None:
    acc = AnthropicAccountant()
    assert acc.account(body(user(text(50)), system=clock_system(0)), at=0.0).usage == Usage(
        written_5m=3050
    )
    for second in (10, 20):
        payload = body(
            user(text(50)), assistant(text(200)), user(text(60)), system=clock_system(second)
        )
        assert acc.account(payload, at=float(second)).usage == Usage(written_5m=3310)


def test_t4_explicit_1h_breakpoint_on_tools_survives_a_changing_system() -> None:
    acc = AnthropicAccountant()
    tools = [tool(ttl="1h")]
    first = acc.account(body(user(text(50)), system=clock_system(0), tools=tools), at=0.0)
    assert first.usage == Usage(written_1h=2000, written_5m=1050)
    payload = body(
        user(text(50)), assistant(text(200)), user(text(60)), system=clock_system(10), tools=tools
    )
    assert acc.account(payload, at=10.0).usage == Usage(read=2000, written_5m=1310)


def test_t5_mixed_ttls_with_no_hit_split_at_the_last_1h_breakpoint() -> None:
    payload = body(user(text(5000, ttl="5m"), text(40)), system=[text(1000, ttl="1h")], auto=False)
    outcome = AnthropicAccountant().account(payload, at=0.0)
    assert outcome.usage == Usage(written_1h=3000, written_5m=5000, uncached=40)


def test_t6_more_than_20_new_blocks_miss_the_previous_write() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0)
    payload = body(
        user(text(50)),
        assistant(*(text(10) for _ in range(12))),
        user(*(text(10) for _ in range(13))),
    )
    outcome = acc.account(payload, at=10.0)
    assert outcome.usage == Usage(written_5m=3300)
    assert outcome.misses == (MissFact(cause="lookback", index=2, tokens=3050, positions_back=25),)


def test_t7_parallel_tool_runs_count_as_one_position_each() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0)
    payload = body(
        user(text(50)),
        assistant(*(tool_use(i) for i in range(12))),
        user(*(tool_result(i) for i in range(12)), text(10)),
    )
    outcome = acc.account(payload, at=10.0)
    assert outcome.usage.read == 3050
    assert outcome.usage == Usage(read=3050, written_5m=outcome.total_tokens - 3050)
    assert outcome.hit_index == 2


def test_t7_without_collapsing_runs_the_same_turn_misses() -> None:
    acc = AnthropicAccountant(AnthropicSettings(collapse_tool_runs=False))
    acc.account(turn1(), at=0.0)
    payload = body(
        user(text(50)),
        assistant(*(tool_use(i) for i in range(12))),
        user(*(tool_result(i) for i in range(12)), text(10)),
    )
    assert acc.account(payload, at=10.0).usage.read == 0


def test_t8_prefix_below_the_model_minimum_is_not_cached() -> None:
    payload = body(user(text(50)), model="claude-opus-4-6", system=[text(950)])
    outcome = AnthropicAccountant().account(payload, at=0.0)
    assert outcome.usage == Usage(uncached=3000)
    assert outcome.misses == (MissFact(cause="below_minimum", tokens=3000, minimum=4096),)


def test_t9_a_5m_entry_is_gone_6_minutes_after_the_writing_request_started() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0)
    outcome = acc.account(turn2(), at=360.0)
    assert outcome.usage == Usage(written_5m=3310)
    assert outcome.misses == (
        MissFact(cause="expired", index=2, tokens=3050, ttl="5m", expired_for=60.0, idle=360.0),
    )


def test_t10_parallel_identical_requests_both_write() -> None:
    acc = AnthropicAccountant(AnthropicSettings(ttft=2.0))
    first = acc.account(turn1(), at=0.0)
    second = acc.account(turn1(), at=0.0)
    assert first.usage == second.usage == Usage(written_5m=3050)
    assert second.misses == (MissFact(cause="concurrent", index=2, tokens=3050, available_in=2.0),)
    assert acc.account(turn1(), at=2.0).usage == Usage(read=3050)


def test_t11_tool_choice_change_invalidates_every_message_key() -> None:
    acc = AnthropicAccountant()
    acc.account(body(user(text(50)), tool_choice={"type": "auto"}), at=0.0)
    outcome = acc.account(turn2(tool_choice={"type": "any"}), at=10.0)
    assert outcome.usage == Usage(written_5m=3310)


def test_tail_overhead_is_uncached() -> None:
    acc = AnthropicAccountant(AnthropicSettings(tail_overhead=4))
    assert acc.account(turn1(), at=0.0).usage == Usage(written_5m=3050, uncached=4)


def test_a_read_refreshes_the_ttl() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0)
    assert acc.account(turn1(), at=240.0).usage == Usage(read=3050)
    assert acc.account(turn1(), at=480.0).usage == Usage(read=3050)


def test_mixed_ttls_after_a_hit_bill_1h_up_to_the_last_1h_breakpoint() -> None:
    acc = AnthropicAccountant()
    system = [text(1000, ttl="1h")]
    acc.account(body(user(text(50)), system=system), at=0.0)
    payload = body(user(text(50)), assistant(text(200, ttl="1h")), user(text(60)), system=system)
    assert acc.account(payload, at=10.0).usage == Usage(read=3050, written_1h=200, written_5m=60)


def test_the_1h_entry_outlives_the_5m_one() -> None:
    acc = AnthropicAccountant()
    system = [text(1000, ttl="1h")]
    acc.account(body(user(text(50)), system=system), at=0.0)
    outcome = acc.account(body(user(text(50)), system=system), at=600.0)
    assert outcome.usage == Usage(read=3000, written_5m=50)


def test_markers_are_not_content() -> None:
    acc = AnthropicAccountant()
    acc.account(body(user(text(50, ttl="5m")), auto=False), at=0.0)
    assert acc.account(turn2(), at=10.0).usage == Usage(read=3050, written_5m=260)


def test_a_string_system_and_string_content_equal_single_text_blocks() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0)
    payload = body({"role": "user", "content": pad(50)}, system=pad(1000))
    assert acc.account(payload, at=1.0).usage == Usage(read=3050)


def test_key_order_inside_tool_use_input_is_part_of_the_key() -> None:
    acc = AnthropicAccountant()
    call = {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"a": 1, "b": 2}}
    swapped = {**call, "input": {"b": 2, "a": 1}}
    acc.account(turn1(), at=0.0)
    messages = (user(text(50)), assistant(call), user(tool_result(1)))
    acc.account(body(*messages), at=0.0)
    moved = (user(text(50)), assistant(swapped), user(tool_result(1)))
    outcome = acc.account(body(*moved), at=1.0)
    assert outcome.usage.read == 3050  # only up to the reordered block


def test_no_breakpoints_reads_and_writes_nothing() -> None:
    outcome = AnthropicAccountant().account(turn1() | {"cache_control": None}, at=0.0)
    assert outcome.usage == Usage(uncached=3050)
    assert outcome.misses == (MissFact(cause="no_breakpoints"),)


def test_workspaces_are_isolated() -> None:
    acc = AnthropicAccountant()
    acc.account(turn1(), at=0.0, workspace="a")
    assert acc.account(turn1(), at=1.0, workspace="b").usage == Usage(written_5m=3050)
    assert acc.account(turn1(), at=2.0, workspace="a").usage == Usage(read=3050)
    assert len(acc.entries("a")) == len(acc.entries("b")) == 1
    acc.reset()
    assert acc.entries("a") == {}


def test_lru_eviction_is_reported() -> None:
    acc = AnthropicAccountant(AnthropicSettings(max_entries=1))
    acc.account(turn1(), at=0.0)
    acc.account(body(user(text(50, prefix="other"))), at=1.0)
    outcome = acc.account(turn1(), at=2.0)
    assert outcome.usage == Usage(written_5m=3050)
    assert outcome.misses == (MissFact(cause="evicted", index=2, tokens=3050),)


def test_earlier_breakpoints_are_refreshed_for_free() -> None:
    def run(refresh: bool) -> Usage:
        acc = AnthropicAccountant(AnthropicSettings(refresh_earlier_breakpoints=refresh))
        acc.account(turn1(), at=0.0)
        system = [text(1000, cached=True)]
        acc.account(body(user(text(50)), system=system), at=200.0)  # hit at 3,050
        return acc.account(body(user(text(50, prefix="new")), system=system), at=400.0).usage

    assert run(True) == Usage(read=3000, written_5m=50)
    assert run(False) == Usage(written_5m=3050)


# Thinking: claude-haiku-4-5 strips earlier thinking (minimum 4,096, so system is 3,000).


def thinking_turns(model: str) -> tuple[dict, dict, dict]:
    system = [text(3000)]
    first = user(text(50))
    thought = assistant({"type": "thinking", "thinking": pad(100), "signature": "sig"}, tool_use(1))
    loop = (first, thought, user(tool_result(1)))
    return (
        body(first, model=model, system=system),
        body(*loop, model=model, system=system),
        body(*loop, assistant(text(50)), user(text(40)), model=model, system=system),
    )


def test_strips_thinking_model_loses_the_prefix_from_the_dropped_block() -> None:
    acc = AnthropicAccountant()
    first, loop, next_turn = thinking_turns("claude-haiku-4-5")
    assert acc.account(first, at=0.0).usage == Usage(written_5m=5050)
    in_loop = acc.account(loop, at=1.0)
    assert in_loop.usage.read == 5050
    outcome = acc.account(next_turn, at=2.0)
    assert outcome.usage.read == 5050
    assert outcome.total_tokens == in_loop.total_tokens - 100 + 90


def test_preserving_model_keeps_thinking_in_the_prefix() -> None:
    acc = AnthropicAccountant()
    first, loop, next_turn = thinking_turns("claude-sonnet-4-6")
    acc.account(first, at=0.0)
    in_loop = acc.account(loop, at=1.0)
    outcome = acc.account(next_turn, at=2.0)
    assert outcome.usage == Usage(read=in_loop.total_tokens, written_5m=90)


def test_thinking_config_change_invalidates_messages_only() -> None:
    acc = AnthropicAccountant()
    system = [text(1000, cached=True)]
    acc.account(body(user(text(50)), system=system), at=0.0)
    payload = body(
        user(text(50)), system=system, thinking={"type": "enabled", "budget_tokens": 2048}
    )
    assert acc.account(payload, at=1.0).usage == Usage(read=3000, written_5m=50)


def test_speed_change_invalidates_system_and_messages() -> None:
    acc = AnthropicAccountant()
    tools = [tool(ttl="5m")]
    acc.account(body(user(text(50)), tools=tools), at=0.0)
    outcome = acc.account(body(user(text(50)), tools=tools, speed="fast"), at=1.0)
    assert outcome.usage == Usage(read=2000, written_5m=1050)


# HTTP 400s


def test_five_breakpoints_are_rejected() -> None:
    payload = body(user(*(text(10, cached=True) for _ in range(4))))
    payload["messages"][0]["content"].append(text(10))
    with pytest.raises(
        InvalidRequest,
        match=r"A maximum of 4 blocks with cache_control may be provided\. Found 5\.",
    ):
        AnthropicAccountant().account(payload, at=0.0)


def test_automatic_breakpoint_on_an_explicit_one_with_the_same_ttl_is_a_no_op() -> None:
    payload = body(user(*(text(10, cached=True) for _ in range(4))))
    outcome = AnthropicAccountant().account(payload, at=0.0)
    assert len(outcome.breakpoints) == 4


def test_automatic_breakpoint_on_an_explicit_one_with_another_ttl_is_rejected() -> None:
    payload = body(user(text(50, ttl="1h")))
    with pytest.raises(InvalidRequest, match="already has cache_control"):
        AnthropicAccountant().account(payload, at=0.0)


def test_1h_after_5m_is_rejected() -> None:
    payload = body(user(text(50, ttl="1h")), system=[text(1000, ttl="5m")], auto=False)
    with pytest.raises(InvalidRequest, match="ttl='1h' cache_control block must not come after"):
        AnthropicAccountant().account(payload, at=0.0)


def test_cache_control_on_thinking_is_rejected() -> None:
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s", "cache_control": marker()}
    payload = body(user(text(50)), assistant(thinking, text(5)), user(text(5)))
    with pytest.raises(InvalidRequest, match=r"messages\.1\.content\.0\.thinking: cache_control"):
        AnthropicAccountant().account(payload, at=0.0)


def test_cache_control_on_empty_text_is_rejected() -> None:
    payload = body(user({"type": "text", "text": "", "cache_control": marker()}))
    with pytest.raises(InvalidRequest, match="cannot be set for empty text blocks"):
        AnthropicAccountant().account(payload, at=0.0)


def test_automatic_breakpoint_walks_back_over_thinking_and_empty_text() -> None:
    thinking = {"type": "thinking", "thinking": pad(30), "signature": "s"}
    payload = body(user(text(50)), assistant(text(20), thinking, {"type": "text", "text": ""}))
    outcome = AnthropicAccountant().account(payload, at=0.0)
    assert outcome.breakpoints == (CacheBreakpoint(index=3, ttl="5m", tokens=3070),)
    assert outcome.usage == Usage(written_5m=3070, uncached=30)


def test_usage_under_anthropic_field_names() -> None:
    usage = Usage(uncached=40, written_5m=5000, written_1h=3000, read=7, output=9)
    assert anthropic.usage_fields(usage) == {
        "input_tokens": 40,
        "cache_creation_input_tokens": 8000,
        "cache_read_input_tokens": 7,
        "cache_creation": {"ephemeral_5m_input_tokens": 5000, "ephemeral_1h_input_tokens": 3000},
        "output_tokens": 9,
    }


def test_miss_facts_describe_themselves() -> None:
    fact = MissFact(cause="expired", tokens=3050, ttl="5m", expired_for=60.0, idle=360.0)
    assert "expired 60 s ago" in fact.describe()
    assert "4,096" in MissFact(cause="below_minimum", tokens=3000, minimum=4096).describe()


def test_min_cacheable_override_per_model() -> None:
    acc = AnthropicAccountant(AnthropicSettings(min_cacheable={"claude-sonnet-4-6": 4000}))
    outcome = acc.account(turn1(), at=0.0)
    assert outcome.usage == Usage(uncached=3050)
    assert outcome.misses == (MissFact(cause="below_minimum", tokens=3050, minimum=4000),)


def test_models_rendering_thinking_before_tools_lose_tools_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = dataclasses.replace(model_info("claude-sonnet-4-6"), renders_thinking_before_tools=True)
    monkeypatch.setattr(anthropic_module, "model_info", lambda name: info)
    acc = AnthropicAccountant()
    tools = [tool(ttl="5m")]
    acc.account(body(user(text(50)), tools=tools), at=0.0)
    payload = body(user(text(50)), tools=tools, output_config={"effort": "low"})
    assert acc.account(payload, at=1.0).usage == Usage(written_5m=3050)


def test_entries_are_inspectable() -> None:
    acc = AnthropicAccountant(AnthropicSettings(ttft=1.0))
    acc.account(turn1(), at=10.0)
    (entry,) = acc.entries().values()
    assert entry == CacheEntry(
        tokens=3050, ttl="5m", expires_at=310.0, available_at=11.0, created_at=10.0, last_used=10.0
    )


def test_exports_are_sorted() -> None:
    assert accounting.__all__ == sorted(set(accounting.__all__))
