"""Cache truth after a switch back and after a resume: a thinking turn that has ended is
read only up to where its thinking began, whichever turn it was; a resumed session keeps
its 1-hour entries and the idle gaps it watched, as the process before it had them."""

from __future__ import annotations

import uuid

import pytest

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.review import ReviewConfig
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.cache.fleet import FleetWatch
from stoker.cache.planner import plan_anthropic, readable_part
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.wire.blocks import ThinkingBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.messages import AssistantMessage, Message, UserMessage, user_text


def _loop(text: str, steps: int, *, thinking: bool) -> list[Message]:
    """A user turn of `steps` tool calls, each answered: two positions per step."""
    messages: list[Message] = [user_text(text)]
    for i in range(steps):
        think = (ThinkingBlock(thinking="plan", signature="s"),) if thinking else ()
        call = ToolUseBlock(id=f"{text}{i}", name="f", input_json="{}")
        messages.append(AssistantMessage(content=(*think, call)))
        result = ToolResultBlock(tool_use_id=f"{text}{i}", content="ok")
        messages.append(UserMessage(content=(result,)))
    return messages


def test_an_entry_inside_an_older_thinking_turn_is_read_where_its_thinking_began() -> None:
    """Model A wrote deep inside a thinking turn; model B ran the next turns; back on A,
    that write no longer matches (its turn's thinking is gone). The planner marks where
    the turn's thinking began, the longest prefix A still holds; before, it marked the
    stale write and read only what an older entry covered."""
    a_turn = _loop("a", 12, thinking=True)  # positions 0..24; thinking from message 1
    messages = [*_loop("warm", 2, thinking=False), *a_turn, *_loop("b", 3, thinking=True)]
    messages.append(user_text("back to a"))
    stale = (4 + 22, 0)  # a write 11 steps into A's turn
    assert readable_part(messages, stale) == (5, 0)  # A's turn starts at message 5
    found = plan_anthropic(messages, previous=stale, strips_thinking=True)
    marks = [(b.message, b.block) for b in found.breakpoints if b.message is not None]
    assert (5, 0) in marks
    assert stale not in marks


def test_a_childs_anchor_inside_an_ended_thinking_turn_is_marked_where_it_is() -> None:
    """A sub-agent began a turn of its own on the parent's history, so its 1-hour anchor
    cached that history with the thinking already dropped: it matches the parent's
    requests once the parent's turn is over, and the planner marks it as it is."""
    a_turn = _loop("a", 1, thinking=True)  # the parent delegated at message 6
    messages = [*_loop("warm", 2, thinking=False), *a_turn, *_loop("b", 12, thinking=False)]
    messages.append(user_text("thanks"))
    found = plan_anthropic(messages, previous=None, held=(6, 1), strips_thinking=True)
    marks = [(b.message, b.block) for b in found.breakpoints if b.message is not None]
    assert (6, 1) in marks


def test_a_previous_write_the_session_holds_for_an_hour_is_marked_where_it_is() -> None:
    """The previous write is a review's 1-hour anchor at the end of an ended thinking
    turn (its request began a turn of its own, so it cached the history as the parent
    sends it now): a fork's first call marks it, beside its own anchor, and not where
    the turn's thinking began (with both, the markers would run out before it)."""
    messages = [*_loop("warm", 2, thinking=False), *_loop("a", 1, thinking=True)]
    held = (len(messages) - 1, 0)
    messages += [*_loop("b", 12, thinking=False), user_text("thanks")]
    fork = (len(messages) - 2, 0)
    found = plan_anthropic(messages, previous=held, held=held, anchor=fork, strips_thinking=True)
    marks = [(b.message, b.block) for b in found.breakpoints if b.message is not None]
    assert marks == [held, fork, (len(messages) - 1, 0)]


def test_once_the_short_entries_expired_a_held_entry_comes_before_the_cut() -> None:
    """A fork's first call after the parent's entries expired (its keep-warm ran out):
    the anchor, the cut where the last turn's thinking began and a sub-agent's 1-hour
    entry further back all want a marker, and only two fit. While the short entries live
    the cut wins; once they have expired (`stale`) the held entry, the one still live."""
    messages = [*_loop("warm", 1, thinking=False), *_loop("a", 1, thinking=False)]
    held = (len(messages) - 1, 0)
    messages += [*_loop("b", 12, thinking=False), *_loop("c", 12, thinking=True)]
    messages.append(user_text("anything worth remembering?"))
    fork = (len(messages) - 2, 0)
    cut = (len(messages) - 26, 0)  # where turn "c" began

    def marks(*, stale: bool) -> list[tuple[int | None, int]]:
        found = plan_anthropic(
            messages, previous=None, held=held, anchor=fork, strips_thinking=True, stale=stale
        )
        return [(b.message, b.block) for b in found.breakpoints if b.message is not None]

    assert marks(stale=False) == [cut, fork, (len(messages) - 1, 0)]
    assert marks(stale=True) == [held, fork, (len(messages) - 1, 0)]


def test_the_current_turn_keeps_its_thinking() -> None:
    messages = _loop("now", 4, thinking=True)
    assert readable_part(messages, (6, 0)) == (6, 0)


def test_a_turn_without_thinking_is_read_whole() -> None:
    messages = [*_loop("plain", 12, thinking=False), user_text("next")]
    assert readable_part(messages, (20, 0)) == (20, 0)


def _agent(
    clock: FrozenClock, engine: SimEngine, fleet: FleetWatch, model: str = "claude-sonnet-4-6"
) -> Agent:
    """One process's agent; `fleet`: what the process knows of its agent's sessions."""
    return Agent(
        model,
        provider=SimProvider(engine=engine, clock=clock),
        tools=[*TOOLS, delegate_tool()],
        system=SYSTEM,
        clock=clock,
        review=ReviewConfig(memory_every=0),
        fleet=fleet,
    )


async def _lived(store: SqlEventStore, *, resume: bool, ending: str) -> list[tuple[object, ...]]:
    """Turns with idle gaps, sub-agents (their 1-hour anchors), a loop that leaves the
    anchors past the lookback, then one of three endings, with (`resume`) or without the
    session opened again from the store before its last step:
    - "gap": a gap its short entries do not outlive, a new turn;
    - "keep-warm": the keep-warm the time policy plans, then the same;
    - "switch back": a turn on another model, a gap, back to the first model, a fork
      (its first call has the anchor, the previous write and a held entry to mark).
    What it records: the keep-warm plan, and what the last calls marked and read."""
    clock, fleet = FrozenClock(1_790_000_000.0), FleetWatch()  # one process: one fleet
    engine = SimEngine(model=WorkloadModel())
    session = await _agent(clock, engine, fleet).open(store, f"s-{uuid.uuid4().hex[:8]}")
    for gap in (240.0, 600.0, 90.0):
        await session.send("Work on it: run 2 steps")
        clock.advance(gap)
    await session.send("Please delegate the checks")
    await session.send("Work on it: run 14 steps")
    plan = session.warm_plan()
    if ending == "keep-warm" and plan is not None and plan.sends:
        clock.advance(plan.at - clock.now())
        await session.warm()
    if ending == "switch back":
        await session.rebase(reason="/model claude-sonnet-4-5", model="claude-sonnet-4-5")
        await session.send("Work on it: run 12 steps")
    if resume:
        model = session.prefix.params.model
        agent = _agent(clock, engine, fleet, model)
        session = await agent.open(store, session.id, create=False)
    seen: list[tuple[object, ...]] = [("plan", session.warm_plan())]
    clock.advance(20 * 60 if ending != "switch back" else 10 * 60)
    if ending == "switch back":
        await session.rebase(reason="/model claude-sonnet-4-6", model="claude-sonnet-4-6")
        result = await session.fork(role="fork").send("Anything worth remembering?")
    else:
        result = await session.send("Thanks.")
    seen += [(r.breakpoints, r.usage, r.explanation) for r in result.records]
    return seen


@pytest.mark.parametrize("ending", ["gap", "keep-warm", "switch back"])
async def test_a_resumed_session_plans_and_reads_as_its_last_process_would(
    store: SqlEventStore, ending: str
) -> None:
    """The same life twice (SQLite and PostgreSQL), once resumed from the store before
    its last step: the same keep-warm plan, the same breakpoints, reads and verdicts.
    Before, the resumed one forgot the sub-agents' 1-hour anchors (its new turn read
    none of them), the idle gaps it had seen (its plan's chance of a return moved), when
    its idle time began (a keep-warm since is not the end of a turn), and when each
    prefix last wrote (after a switch back, a fork marked an expired write, not a live
    anchor)."""
    resumed = await _lived(store, resume=True, ending=ending)
    # The second life must not learn from the first one's gaps (a new session learns
    # when people come back from the store's other sessions, stoker.cache.learned).
    for session_id in await store.session_ids():
        await store.delete(session_id)
    assert resumed == await _lived(store, resume=False, ending=ending)
