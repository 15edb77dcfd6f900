"""Breakpoint placement, without a provider: where markers go and when an intermediate is added."""

from __future__ import annotations

import pytest

from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy, plan, plan_anthropic, positions_between
from stoker.errors import ConfigError
from stoker.wire.blocks import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.messages import AssistantMessage, UserMessage, user_text
from stoker.wire.request import Breakpoint


def _calls(n: int) -> AssistantMessage:
    return AssistantMessage(
        content=tuple(ToolUseBlock(id=f"t{i}", name="f", input_json="{}") for i in range(n))
    )


def _results(n: int) -> UserMessage:
    return UserMessage(
        content=tuple(ToolResultBlock(tool_use_id=f"t{i}", content="ok") for i in range(n))
    )


def test_first_request_marks_system_and_last_block() -> None:
    p = plan_anthropic([user_text("hi")], previous=None)
    assert p.breakpoints == (Breakpoint(message=None, ttl="5m"), Breakpoint(message=0, block=0))
    assert p.rolling == (0, 0)


def test_rolling_breakpoint_skips_thinking_blocks() -> None:
    msgs = [
        user_text("hi"),
        AssistantMessage(content=(TextBlock(text="a"), ThinkingBlock(thinking="t"))),
    ]
    assert plan_anthropic(msgs, previous=None).rolling == (1, 0)


def test_tool_runs_count_as_one_position() -> None:
    msgs = [
        user_text("go"),
        _calls(12),
        _results(12),
        AssistantMessage(content=(TextBlock(text="done"),)),
    ]
    assert positions_between(msgs, (0, 0), (3, 0)) == 3


def test_intermediate_breakpoint_only_when_the_previous_write_leaves_the_window() -> None:
    short = [
        user_text("a"),
        AssistantMessage(content=tuple(TextBlock(text=str(i)) for i in range(19))),
    ]
    assert len(plan_anthropic(short, previous=(0, 0)).breakpoints) == 2
    long = [
        user_text("a"),
        AssistantMessage(content=tuple(TextBlock(text=str(i)) for i in range(25))),
    ]
    p = plan_anthropic(long, previous=(0, 0))
    assert p.breakpoints == (
        Breakpoint(message=None),
        Breakpoint(message=0, block=0),
        Breakpoint(message=1, block=24),
    )


def test_never_more_than_four_breakpoints_and_ttls_in_order() -> None:
    msgs = [
        user_text("a"),
        AssistantMessage(content=tuple(TextBlock(text=str(i)) for i in range(60))),
    ]
    p = plan_anthropic(msgs, previous=(0, 0), policy=CachePolicy(system_ttl="1h"))
    assert len(p.breakpoints) <= 4
    assert [b.ttl for b in p.breakpoints] == ["1h", "5m", "5m"]


def test_one_hour_messages_need_one_hour_system() -> None:
    with pytest.raises(ConfigError, match="longer TTLs"):
        CachePolicy(message_ttl="1h")


def test_openai_breakpoints_by_regime() -> None:
    assert plan(model_info("gpt-5.6"), [user_text("a")], previous=None).breakpoints == (
        Breakpoint(),
    )
    assert plan(model_info("gpt-4.1"), [user_text("a")], previous=None).breakpoints == ()
