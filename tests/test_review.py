"""Background review is a fork: same prefix bytes, narrowed policy, failures contained."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stoker.agent.review import ReviewConfig, ReviewCounters, summarize
from stoker.agent.seams import Callbacks
from stoker.providers.sim.model import RuleModel, tool_call
from stoker.tools import Toolset, tool
from stoker.wire.blocks import Block, TextBlock, ToolResultBlock
from stoker.wire.events import MemorySink
from stoker.wire.messages import UserMessage, user_text
from stoker.wire.request import Request
from tests.helpers import make_registry, sim_agent, without_markers

SAVED: list[str] = []


@tool
def memory(action: str, target: str, text: str) -> str:
    """Save a durable fact.

    Args:
        action: add, replace or remove.
        target: memory or user.
        text: The entry.
    """
    SAVED.append(text)
    return f"Memory updated: {action} {text!r}"


class ReviewingModel:
    """RuleModel for the main conversation; in a review, does what `review` says."""

    def __init__(self, review: str = "save") -> None:
        self.review = review
        self.rules = RuleModel()

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        in_review = any(
            isinstance(m, UserMessage) and "Background review" in m.text for m in request.messages
        )
        if not in_review:
            return self.rules.respond(request)
        if isinstance(last, UserMessage) and not last.text:
            return (TextBlock(text="saved"),)
        if self.review == "raise":
            raise RuntimeError("the review model is down")
        if self.review == "shell":
            return (tool_call(request, "run_shell", {"text": "rm -rf /"}),)
        return (
            tool_call(request, "memory", {"action": "add", "target": "user", "text": "likes tea"}),
        )


def _agent(mode: str = "save", **kwargs: Any):  # type: ignore[no-untyped-def]
    registry = make_registry()
    registry.register(Toolset(name="memory_tools", tools=[memory]))
    kwargs.setdefault("review", ReviewConfig(memory_every=1))
    return sim_agent(model=ReviewingModel(mode), registry=registry, **kwargs)


def _without_messages(payload: dict[str, Any]) -> str:
    rest = {k: v for k, v in payload.items() if k != "messages"}
    return json.dumps(without_markers(rest), sort_keys=True)


@pytest.mark.parametrize(
    ("toolsets", "thinking"),
    [
        (None, None),
        (("files", "memory_tools"), None),
        (("files", "memory", "shell", "memory_tools"), None),
        (None, 2048),
    ],
    ids=["default", "narrowed", "widened", "thinking"],
)
async def test_review_first_request_matches_the_parents_last_byte_for_byte(
    toolsets: tuple[str, ...] | None, thinking: int | None
) -> None:
    agent, provider = _agent(toolsets=toolsets, thinking_budget=thinking)
    sink = MemorySink()
    session = agent.session(store=sink)
    await session.send("hello there")
    parent_last, parent_usage = provider.requests[-1], session.records[-1].usage
    (outcome,) = await session.drain()
    review_first = provider.requests[len(session.records)]
    assert _without_messages(review_first) == _without_messages(parent_last)
    shared = review_first["messages"][: len(parent_last["messages"])]
    assert without_markers(shared) == without_markers(parent_last["messages"])
    review_records = [
        e.record for e in sink.events if e.type == "cache_recorded" and e.record.role == "review"
    ]
    assert review_records[0].usage.read == parent_usage.read + parent_usage.written
    assert outcome.summary == "Memory updated"


async def test_review_asking_for_a_shell_gets_a_denial_and_the_tool_never_runs() -> None:
    calls: list[str] = []
    registry = make_registry(calls)
    registry.register(Toolset(name="memory_tools", tools=[memory]))
    agent, _ = sim_agent(
        model=ReviewingModel("shell"), registry=registry, review=ReviewConfig(memory_every=1)
    )
    sink = MemorySink()
    session = agent.session(store=sink)
    await session.send("hello")
    (outcome,) = await session.drain()
    assert calls == []
    assert outcome.summary == ""
    review_events = [
        e for e in sink.events if e.type == "message_appended" and ".review-" in e.session_id
    ]
    denial = review_events[-2].message.tool_results[0]
    assert denial.is_error
    assert denial.content.startswith("tool run_shell is not allowed in this run")


async def test_a_failing_review_leaves_the_main_session_usable_and_reports_it() -> None:
    errors: list[BaseException] = []
    agent, _ = _agent("raise")
    sink = MemorySink()
    session = agent.session(store=sink)
    before = await session.send("hello", callbacks=Callbacks(on_review_error=errors.append))
    (outcome,) = await session.drain()
    assert isinstance(outcome.error, RuntimeError)
    assert [str(e) for e in errors] == ["the review model is down"]
    after = await session.send("still there?")
    assert (before.exit, after.exit) == ("answered", "answered")
    assert [m.role for m in session.history] == ["user", "assistant", "user", "assistant"]


async def test_review_writes_nothing_to_the_main_history_and_reports_one_line() -> None:
    lines: list[str] = []
    agent, _ = _agent()
    sink = MemorySink()
    session = agent.session(store=sink)
    await session.send("hello", callbacks=Callbacks(on_review=lines.append))
    await session.drain()
    assert len(session.history) == 2
    assert lines == ["Memory updated"]


def test_summary_does_not_repeat_an_update_already_in_the_conversation() -> None:
    done = "Memory updated: add 'likes tea'"
    snapshot = (
        user_text("x"),
        UserMessage(content=(ToolResultBlock(tool_use_id="a", content=done),)),
    )
    same = UserMessage(content=(ToolResultBlock(tool_use_id="b", content=done),))
    other = UserMessage(
        content=(ToolResultBlock(tool_use_id="c", content="Skill 'deploy-checklist' created"),)
    )
    assert summarize(snapshot, (*snapshot, same)) == ""
    assert (
        summarize(snapshot, (*snapshot, same, other, other)) == "Skill 'deploy-checklist' created"
    )
    fresh = UserMessage(
        content=(ToolResultBlock(tool_use_id="d", content="Memory updated: add 'x'"),)
    )
    assert (
        summarize(snapshot, (*snapshot, fresh, other))
        == "Memory updated · Skill 'deploy-checklist' created"
    )


def test_counters_decide_which_review_is_due() -> None:
    config = ReviewConfig(memory_every=2, skills_every=3)
    c = ReviewCounters()
    assert [c.after_turn(i, config) for i in (1, 1, 3, 2, 1, 1)] == [
        None,
        "memory",
        None,
        "both",
        None,
        "memory",
    ]
    assert ReviewCounters().after_turn(9, ReviewConfig()) is None


async def test_review_on_a_cheaper_model_is_a_declared_break() -> None:
    agent, provider = _agent(review=ReviewConfig(memory_every=1, model="claude-haiku-4-5"))
    sink = MemorySink()
    session = agent.session(store=sink)
    await session.send("hello")
    await session.drain()
    review = [
        e.record for e in sink.events if e.type == "cache_recorded" and e.record.role == "review"
    ]
    assert review[0].explanation.verdict == "declared"
    assert "another cache namespace" in (review[0].declared_break or "")
    assert provider.requests[-1]["model"] == "claude-haiku-4-5"
