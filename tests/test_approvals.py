"""Approvals: a risky call in a foreground run asks before it runs, a background run
denies it without asking, every decision is stored with who decided, and waiting for
an answer costs no cache read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker.agent.delegate import delegate_tool
from stoker.agent.review import ReviewConfig
from stoker.agent.seams import Callbacks
from stoker.clock import FrozenClock
from stoker.providers.sim.model import Call, ScriptedModel
from stoker.store.sqlite import SQLiteStore
from stoker.tools import (
    ApprovalDecision,
    ApprovalRequest,
    Approvals,
    ToolContext,
    ToolRegistry,
    run_tool_calls,
)
from stoker.tools.approval import summarize
from stoker.toolsets.workspace import workspace_toolset
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock
from stoker.wire.events import ApprovalDecided, MemorySink
from tests.helpers import sim_agent, wipe

ASK = "add_note 'ship on friday'"


class Answers:
    """An approver that says `approved` as `by`, after `wait` seconds of a frozen clock,
    and keeps what it was asked (and what the session planned meanwhile)."""

    def __init__(
        self, approved: bool = True, *, by: str = "user:alice", clock: FrozenClock | None = None
    ) -> None:
        self.approved, self.by, self.clock = approved, by, clock or FrozenClock()
        self.wait = 0.0
        self.asked: list[tuple[ApprovalRequest, ToolContext]] = []

    async def __call__(self, request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
        self.asked.append((request, context))
        self.clock.advance(self.wait)
        return ApprovalDecision(
            approved=self.approved,
            by=self.by,
            reason="" if self.approved else "not now",
            at=self.clock.now(),
        )


def _agent(tmp_path: Path, clock: FrozenClock | None = None, **kwargs: Any) -> Any:
    registry = ToolRegistry([workspace_toolset(tmp_path)])
    return sim_agent(registry=registry, clock=clock, **kwargs)


def _decisions(sink: MemorySink) -> list[ApprovalDecided]:
    return [e for e in sink.events if isinstance(e, ApprovalDecided)]


async def test_an_approved_call_runs_and_a_denied_one_does_not_each_stored_with_who_decided(
    tmp_path: Path,
) -> None:
    agent, _ = _agent(tmp_path)
    sink = MemorySink()
    session = agent.session(store=sink)
    yes, no = Answers(True, by="user:alice"), Answers(False, by="user:bob")
    await session.send(ASK, callbacks=Callbacks(approver=yes))
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"
    denied = await session.send("add_note 'and on monday'", callbacks=Callbacks(approver=no))
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"  # it did not run

    ((request, context),) = yes.asked
    first_call = session.history[1].tool_calls[0]  # type: ignore[attr-defined]
    assert request == ApprovalRequest(
        tool="add_note",
        tool_use_id=first_call.id,
        arguments='{"text":"ship on friday"}',
        summary='add_note(text="ship on friday")',
        session_id=session.id,
    )
    assert (context.session_id, context.metadata["role"]) == (session.id, "main")
    second_call = session.history[5].tool_calls[0]  # type: ignore[attr-defined]
    assert session.history[6].tool_results == (  # type: ignore[attr-defined]
        ToolResultBlock(
            tool_use_id=second_call.id,
            content="the user denied add_note (user:bob): not now. It did not run; "
            "do not call it again for this, say what it would have done.",
            is_error=True,
        ),
    )
    assert denied.exit == "answered"
    at = FrozenClock().now()

    def decided(call: ToolUseBlock, text: str, **decision: Any) -> ApprovalDecided:
        return ApprovalDecided(
            session_id=session.id,
            tool="add_note",
            tool_use_id=call.id,
            summary=f'add_note(text="{text}")',
            at=at,
            **decision,
        )

    assert _decisions(sink) == [
        decided(first_call, "ship on friday", approved=True, by="user:alice"),
        decided(second_call, "and on monday", approved=False, by="user:bob", reason="not now"),
    ]


async def test_without_an_approver_a_risky_call_runs_unasked_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    agent, _ = _agent(tmp_path)
    sink = MemorySink()
    result = await agent.session(store=sink).send(ASK)
    assert result.text == "Done. Tool results: noted in NOTES.md"
    assert _decisions(sink) == []


async def test_a_safe_tool_never_asks(tmp_path: Path) -> None:
    (tmp_path / "plan.md").write_text("friday\n")
    agent, _ = _agent(tmp_path)
    answers = Answers()
    result = await agent.session().send(
        "read_file 'plan.md'", callbacks=Callbacks(approver=answers)
    )
    assert result.text == "Done. Tool results: friday\n"
    assert answers.asked == []


async def _raises(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
    raise RuntimeError("the button service is down")


async def _times_out(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
    raise TimeoutError


async def _returns_a_bool(request: ApprovalRequest, context: ToolContext) -> Any:
    return True


@pytest.mark.parametrize(
    ("approver", "by", "reason"),
    [
        (_raises, "error", "the approver failed: RuntimeError: the button service is down"),
        (_times_out, "timeout", "nobody answered in time"),
        (_returns_a_bool, "error", "the approver returned bool, not an ApprovalDecision"),
    ],
)
async def test_an_approver_that_fails_or_times_out_denies_and_the_turn_goes_on(
    tmp_path: Path, approver: Any, by: str, reason: str
) -> None:
    agent, _ = _agent(tmp_path)
    sink = MemorySink()
    result = await agent.session(store=sink).send(ASK, callbacks=Callbacks(approver=approver))
    assert result.exit == "answered"
    assert result.text.startswith(f"Done. Tool results: add_note was not approved ({by}): ")
    assert not (tmp_path / "NOTES.md").exists()
    (decision,) = _decisions(sink)
    assert (decision.approved, decision.by, decision.reason) == (False, by, reason)


async def test_arguments_that_do_not_validate_are_refused_before_anyone_is_asked() -> None:
    answers = Answers()
    call = ToolUseBlock(id="toolu_1", name="wipe", input_json='{"path": 3}')
    (result,) = await run_tool_calls(
        [call],
        {"wipe": wipe},
        context_factory=lambda c: ToolContext(session_id="s", tool_use_id=c.id),
        approvals=Approvals(approver=answers),
    )
    assert result.is_error
    assert "invalid arguments" in result.content
    assert answers.asked == []


async def test_a_background_review_denies_a_risky_call_without_asking_and_says_so(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["hello", Call(name="add_note", arguments={"text": "x"}), "nothing"])
    review = ReviewConfig(memory_every=1, allowed_tools=frozenset({"add_note"}))
    agent, _ = _agent(tmp_path, model=model, review=review)
    sink = MemorySink()
    session = agent.session(store=sink)
    answers = Answers()
    await session.send("hi", callbacks=Callbacks(approver=answers))
    (outcome,) = await session.drain()
    assert answers.asked == []
    assert not (tmp_path / "NOTES.md").exists()
    (decision,) = _decisions(sink)
    assert decision.session_id == outcome.session_id != session.id
    assert (decision.approved, decision.by, decision.reason) == (
        False,
        "policy:background",
        "background review",
    )


async def test_a_sub_agent_asks_the_approver_of_the_turn_that_started_it(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            Call(name="delegate", arguments={"goal": "note that we ship on friday"}),
            Call(name="add_note", arguments={"text": "ship on friday"}),
            "noted",
            "the sub-agent noted it",
        ]
    )
    agent, _ = _agent(tmp_path, model=model, tools=[delegate_tool()])
    sink = MemorySink()
    session = agent.session(store=sink)
    answers = Answers()
    result = await session.send("delegate it", callbacks=Callbacks(approver=answers))
    assert result.text == "the sub-agent noted it"
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"
    ((request, context),) = answers.asked
    assert context.metadata["role"] == "subagent"
    assert request.session_id == context.session_id != session.id
    (decision,) = _decisions(sink)
    assert (decision.session_id, decision.by) == (request.session_id, "user:alice")


def _two_workspaces(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs of one turn each write their own NOTES.md."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return tmp_path / "a", tmp_path / "b"


async def _turn_with_a_wait(
    tmp_path: Path, *, approved: bool, wait: float
) -> tuple[list[dict[str, Any]], list[Any]]:
    clock = FrozenClock()
    agent, provider = _agent(tmp_path, clock=clock)
    session = agent.session()
    answers = Answers(approved, clock=clock)
    answers.wait = wait
    await session.send(ASK, callbacks=Callbacks(approver=answers))
    return provider.requests, list(session.records)


async def test_waiting_two_minutes_for_an_approval_reads_everything_written_before(
    tmp_path: Path,
) -> None:
    a, b = _two_workspaces(tmp_path)
    instant, instant_records = await _turn_with_a_wait(a, approved=True, wait=0)
    waited, records = await _turn_with_a_wait(b, approved=True, wait=120)
    assert waited == instant  # every byte of both requests, markers included
    first, second = records
    assert second.started_at - first.started_at == 120
    assert second.explanation.verdict == "hit"
    assert second.usage.read == first.usage.read + first.usage.written  # all of it
    assert [r.usage for r in records] == [r.usage for r in instant_records]


async def test_a_denial_after_a_wait_changes_only_the_tool_result(tmp_path: Path) -> None:
    a, b = _two_workspaces(tmp_path)
    approved, approved_records = await _turn_with_a_wait(a, approved=True, wait=0)
    denied, records = await _turn_with_a_wait(b, approved=False, wait=120)
    assert denied[0] == approved[0]
    for key in ("tools", "system", "model"):
        assert denied[1][key] == approved[1][key]
    assert denied[1]["messages"][:-1] == approved[1]["messages"][:-1]
    assert records[1].usage.read == approved_records[1].usage.read
    assert records[1].usage.read == records[0].usage.read + records[0].usage.written


async def test_no_keep_warm_is_planned_while_a_turn_waits_for_an_approval(tmp_path: Path) -> None:
    clock = FrozenClock()
    agent, _ = _agent(tmp_path, clock=clock)
    session = agent.session()
    await session.send("hello")
    assert session.warm_plan() is not None  # idle between turns: the policy has a plan
    plans: list[Any] = []

    async def slow(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
        clock.advance(minutes=4)  # near the 5-minute entry's end: a ping would be due
        plans.append(session.warm_plan())
        return ApprovalDecision(approved=True, by="user:alice", at=clock.now())

    await session.send(ASK, callbacks=Callbacks(approver=slow))
    assert plans == [None]
    assert session.warm_plan() is not None


async def test_decisions_are_stored_and_read_back(tmp_path: Path) -> None:
    agent, _ = _agent(tmp_path)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "with-approvals")
        await session.send(ASK, callbacks=Callbacks(approver=Answers(False, by="user:bob")))
        stored = [t for _, t, _, _ in await store.events(session.id)]
    assert stored.count("approval_decided") == 1
    assert stored.index("approval_decided") < len(stored) - 3  # before the denial's result


def test_a_summary_is_one_bounded_line() -> None:
    assert (
        summarize("add_note", {"text": "two\nlines", "n": 3}) == 'add_note(text="two\\nlines", n=3)'
    )
    long = summarize("add_note", {"text": "x" * 500})
    assert len(long) == 160
    assert long.endswith("…")
    assert summarize("list_files", {}) == "list_files()"


async def test_a_wait_past_the_entrys_lifetime_rewrites_it_once_and_says_why(
    tmp_path: Path,
) -> None:
    a, b = _two_workspaces(tmp_path)
    _, instant = await _turn_with_a_wait(a, approved=True, wait=0)
    _, (first, second) = await _turn_with_a_wait(b, approved=True, wait=6 * 60)
    assert (second.explanation.verdict, second.usage.read) == ("expired", 0)
    assert second.usage.written == first.usage.written + instant[1].usage.written
