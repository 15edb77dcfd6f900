"""A turn as a stream of typed events, through the public API: their order and content,
`send` as the stream drained, approvals answered from the stream, and a stream left early
(the turn cancelled) followed by a clean next turn, on both stores."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from stoker import (
    Agent,
    ApprovalRequested,
    CallRecorded,
    StatusChanged,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnDone,
    UnansweredApproval,
    tool,
)
from stoker.agent.session import CANCELLED
from stoker.providers.sim.model import Call, ScriptedModel
from stoker.store.base import SqlEventStore
from stoker.testing import assert_no_undeclared_breaks
from stoker.tools import Tool
from stoker.wire.blocks import ToolResultBlock
from stoker.wire.messages import AssistantMessage, UserMessage
from tests.helpers import make_registry, sim_agent, wipe


async def _events(stream: Any) -> list[Any]:
    return [event async for event in stream]


async def test_a_turn_streams_its_events_in_order_and_ends_with_its_result() -> None:
    model = ScriptedModel([Call(name="read_file", arguments={"text": "a.md"}), "The file says hi."])
    agent, _ = sim_agent(model=model, registry=make_registry(), thinking_budget=1024)
    session = agent.session()
    events = await _events(session.stream("read a.md"))
    kinds = [e.kind for e in events]
    assert kinds[0] == "status"
    assert kinds[-1] == "turn_done"
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert (started.name, json.loads(started.arguments)) == ("read_file", {"text": "a.md"})
    assert (finished.call_id, finished.content, finished.is_error) == (
        started.call_id,
        "read_file ok: a.md",
        False,
    )
    assert kinds.index("tool_call_started") < kinds.index("tool_call_finished")
    records = [e.record for e in events if isinstance(e, CallRecorded)]
    result = events[-1].result
    assert records == list(result.records)
    assert len(records) == 2
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == result.text
    assert result.text == "The file says hi."
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking == "Let me work out what is being asked." * 2  # each call thinks
    statuses = [e.text for e in events if isinstance(e, StatusChanged)]
    assert statuses == ["model call 1", "running read_file", "model call 2"]
    # the text of the final answer arrives after the tool's result
    last_tool = max(i for i, k in enumerate(kinds) if k == "tool_call_finished")
    assert all(k != "text_delta" for k in kinds[:last_tool])


async def test_send_is_the_stream_drained() -> None:
    def run() -> tuple[Agent, Any]:
        model = ScriptedModel([Call(name="read_file", arguments={"text": "x"}), "done"])
        return sim_agent(model=model, registry=make_registry())

    streamed_agent, streamed_sim = run()
    sent_agent, sent_sim = run()
    events = await _events(streamed_agent.session().stream("read x"))
    result = await sent_agent.session().send("read x")
    assert isinstance(events[-1], TurnDone)
    assert events[-1].result.text == result.text
    assert [r.usage for r in events[-1].result.records] == [r.usage for r in result.records]

    def unstreamed(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in p.items() if k != "stream"} for p in payloads]

    # the same requests, but that the stream asks the provider to stream its answer
    assert all(p.get("stream") for p in streamed_sim.requests)
    assert unstreamed(streamed_sim.requests) == unstreamed(sent_sim.requests)


async def test_an_approval_is_answered_from_the_stream() -> None:
    ran: list[str] = []

    @tool(risky=True)
    def wipe(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        ran.append(path)
        return f"wiped {path}"

    for approve in (True, False):
        model = ScriptedModel([Call(name="wipe", arguments={"path": "a.txt"}), "ok"])
        agent, _ = sim_agent(model=model, tools=[wipe])
        seen = []
        async with agent.session().stream("wipe a.txt") as events:
            async for event in events:
                seen.append(event)
                if isinstance(event, ApprovalRequested):
                    assert event.request.tool == "wipe"
                    assert event.request.summary == 'wipe(path="a.txt")'
                    if approve:
                        event.approve(by="user:ann")
                    else:
                        event.deny("not today", by="user:ann")
        finished = next(e for e in seen if isinstance(e, ToolCallFinished))
        assert finished.is_error is (not approve)
        assert ("not today" in finished.content) is (not approve)
    assert ran == ["a.txt"]  # only the approved call ran


def _held_until(release: asyncio.Event) -> Tool:
    """A tool named "slow" that finishes only once `release` is set."""

    @tool
    async def slow(text: str) -> str:
        """Take a long time.

        Args:
            text: Anything.
        """
        await release.wait()
        return "finished"

    return slow


async def test_asking_for_the_next_event_before_answering_an_approval_is_an_error() -> None:
    model = ScriptedModel([Call(name="wipe", arguments={"path": "a"}), "ok"])
    agent, _ = sim_agent(model=model, tools=[wipe])
    async with agent.session().stream("wipe a") as events:
        async for event in events:
            if isinstance(event, ApprovalRequested):
                break
        with pytest.raises(UnansweredApproval, match="approve"):
            await events.__anext__()


@pytest.mark.parametrize("where", ["tool", "model"])
async def test_leaving_a_stream_early_cancels_the_turn_and_the_next_turn_is_clean(
    store: SqlEventStore, where: str
) -> None:
    release = asyncio.Event()
    slow = _held_until(release)
    model = ScriptedModel([Call(name="slow", arguments={"text": "x"}), "fine, second turn"])
    agent, provider = sim_agent(model=model, tools=[slow])
    provider.latency = 0.2 if where == "model" else 0.0  # the call is under way when we leave
    session = await agent.open(store, "s1")
    async with session.stream("first") as events:
        async for event in events:
            if where == "tool" and isinstance(event, ToolCallStarted):
                break
            if where == "model" and isinstance(event, StatusChanged):
                break
    history = session.history
    if where == "tool":  # the call got an "interrupted" result, so the history is valid
        assert isinstance(history[-2], AssistantMessage)
        [result] = history[-1].content
        assert isinstance(result, ToolResultBlock)
        assert (result.content, result.is_error) == (CANCELLED, True)
    else:  # cut before the model answered: the user message waits, as a cut-off turn's
        assert isinstance(history[-1], UserMessage)
        assert history[-1].text == "first"
    stored = await store.load("s1")
    assert stored.messages == history  # the store holds what was said, nothing more
    if where == "model":  # the cancelled call was answered (and dropped) upstream
        provider.engine.model = ScriptedModel(["fine, second turn"])
    result = await session.send("second")
    assert result.text == "fine, second turn"
    firsts = [m for m in session.history if isinstance(m, UserMessage) and m.text == "first"]
    assert len(firsts) == 1  # nothing was sent twice
    assert (await store.load("s1")).messages == session.history
    assert_no_undeclared_breaks(session.records)


async def test_a_stream_dropped_without_closing_cancels_its_turn() -> None:
    release = asyncio.Event()
    slow = _held_until(release)
    model = ScriptedModel([Call(name="slow", arguments={"text": "x"}), "ok", "next"])
    agent, _ = sim_agent(model=model, tools=[slow])
    session = agent.session()
    stream = session.stream("go")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    del stream, event
    result = await asyncio.wait_for(session.send("again"), 5)
    assert result.text in ("ok", "next")
