"""A long-lived entry the session holds further back (a sub-agent's 1-hour anchor, a seal)
stays within reach of the next request's breakpoints; the markers never pass four."""

from __future__ import annotations

from stoker.cache.planner import plan_anthropic
from stoker.wire.blocks import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.messages import AssistantMessage, Message, UserMessage, user_text
from stoker.wire.request import Breakpoint


def _loop(steps: int, *, thinking: bool = False) -> list[Message]:
    """A user turn, then `steps` tool calls each answered: two positions per step."""
    messages: list[Message] = [user_text("go")]
    for i in range(steps):
        think = (ThinkingBlock(thinking="plan", signature="s"),) if thinking else ()
        call = ToolUseBlock(id=f"t{i}", name="f", input_json="{}")
        messages.append(AssistantMessage(content=(*think, call)))
        messages.append(UserMessage(content=(ToolResultBlock(tool_use_id=f"t{i}", content="ok"),)))
    return messages


def test_a_held_entry_past_the_lookback_gets_a_breakpoint_of_its_own() -> None:
    messages = [*_loop(12), user_text("thanks")]  # the held entry at (1, 0): 24 positions back
    found = plan_anthropic(messages, previous=(len(messages) - 2, 0), held=(1, 0))
    assert found.breakpoints == (
        Breakpoint(message=None, ttl="5m"),
        Breakpoint(message=1, block=0, ttl="5m"),
        Breakpoint(message=len(messages) - 1, block=0, ttl="5m"),
    )


def test_a_held_entry_within_reach_needs_no_breakpoint() -> None:
    messages = [*_loop(5), user_text("thanks")]
    found = plan_anthropic(messages, previous=(len(messages) - 2, 0), held=(1, 0))
    assert [b.message for b in found.breakpoints] == [None, len(messages) - 1]


def test_a_held_entry_the_previous_write_reaches_needs_no_breakpoint() -> None:
    messages = [
        *_loop(12),
        AssistantMessage(content=tuple(TextBlock(text=f"{i}") for i in range(25))),
    ]
    previous = (4, 0)  # far from the newest block: an intermediate marker goes there
    found = plan_anthropic(messages, previous=previous, held=(1, 0))
    assert [b.message for b in found.breakpoints] == [None, 4, len(messages) - 1]


def test_the_markers_never_pass_four() -> None:
    """A fork's anchor, the cut where thinking is dropped, and a held entry, all far apart:
    the anchor and the cut win, the held entry waits."""
    messages: list[Message] = [*_loop(12), user_text("next"), *_loop(12, thinking=True)[1:]]
    messages.append(AssistantMessage(content=(TextBlock(text="done"),)))
    messages.append(user_text("and now"))
    found = plan_anthropic(
        messages,
        previous=(len(messages) - 3, 0),
        anchor=(len(messages) - 2, 0),
        strips_thinking=True,
        held=(1, 0),
    )
    assert len(found.breakpoints) == 4
    assert (1, 0) not in [(b.message, b.block) for b in found.breakpoints]
