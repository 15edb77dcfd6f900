"""Compaction on the simulator: once past the threshold, the summary reads the parent's
cache, the next call is a declared break, later calls read the compacted prefix, a resume
sends the compacted history byte for byte, and tool pairs are never split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker import CompactionError, CompactionPolicy
from stoker.agent.compaction import SUMMARY_HEADER, choose_cut, compacted, cut_points
from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.errors import InvalidRequest
from stoker.providers.sim.engine import check_tool_pairing
from stoker.providers.sim.model import RuleModel
from stoker.store import open_store
from stoker.wire.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.events import CacheRecorded, HistoryCompacted, MemorySink
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from tests.helpers import make_registry, sim_agent

WINDOW = 12_000
WORDS = "word " * 600  # 600 tokens a turn


def _records(sink: MemorySink) -> list[CacheRecord]:
    return [e.record for e in sink.events if isinstance(e, CacheRecorded)]


def _compactions(sink: MemorySink) -> list[HistoryCompacted]:
    return [e for e in sink.events if isinstance(e, HistoryCompacted)]


# -- where the history is cut ------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Conversations as providers accept them: turns of tool loops, some cut off."""
    history: list[Message] = []
    ids = iter(range(10_000))
    for turn in range(draw(st.integers(1, 6))):
        history.append(
            UserMessage(content=(TextBlock(text=f"ask {turn} " * draw(st.integers(1, 40))),))
        )
        for _ in range(draw(st.integers(0, 3))):
            calls = tuple(
                ToolUseBlock(id=f"t{next(ids)}", name="read_file", input_json="{}")
                for _ in range(draw(st.integers(1, 3)))
            )
            history.append(AssistantMessage(content=calls, stop_reason="tool_use"))
            results = tuple(
                ToolResultBlock(tool_use_id=c.id, content="data " * draw(st.integers(1, 50)))
                for c in calls
            )
            history.append(UserMessage(content=results))
        if draw(st.booleans()) or turn == 0:
            history.append(AssistantMessage(content=(TextBlock(text="answer"),)))
    return history


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 3000))
def test_a_cut_never_splits_a_tool_call_from_its_result(history: list[Message], keep: int) -> None:
    cut = choose_cut(history, keep)
    points = cut_points(history)
    assert (cut is None) == (not points)
    if cut is None:
        return
    before, after = history[:cut], history[cut:]
    called = {c.id for m in before if isinstance(m, AssistantMessage) for c in m.tool_calls}
    answered = {r.tool_use_id for m in before if isinstance(m, UserMessage) for r in m.tool_results}
    assert called == answered  # every call summarised is answered in what is summarised
    later = {r.tool_use_id for m in after if isinstance(m, UserMessage) for r in m.tool_results}
    assert not later & called  # no kept result lost its call
    new = compacted("the summary", history, cut)
    assert new[0].content[0] == TextBlock(text=f"{SUMMARY_HEADER}\n\nthe summary")
    assert new[1:] == tuple(history[cut + 1 :])
    check_tool_pairing(Request(prefix=_any_prefix(), messages=new))  # what providers accept


def _any_prefix() -> Any:
    agent, _ = sim_agent()
    return agent.build_prefix()


def test_the_earliest_cut_whose_tail_fits_is_chosen() -> None:
    turns: list[Message] = []
    for i in range(4):
        turns += [
            UserMessage(content=(TextBlock(text="x " * 100),)),
            AssistantMessage(content=(TextBlock(text=f"a{i}"),)),
        ]
    assert cut_points(turns) == [2, 4, 6]
    assert choose_cut(turns, 250) == 4  # two turns (2 x 101 tokens) fit, three do not
    assert choose_cut(turns, 10) == 6  # nothing fits: the last turn stays whole
    assert choose_cut(turns[:2], 10_000) is None  # one turn: nothing earlier to summarise


# -- a session on the simulator ----------------------------------------------------------


async def _drive(session: Any, turns: int, clock: FrozenClock | None = None) -> None:
    for i in range(turns):
        await session.send(f"turn {i} {WORDS}")
        if clock is not None:
            clock.advance(10)


async def test_a_session_past_the_threshold_compacts_once_and_reads_what_it_can(
    tmp_path: Path,
) -> None:
    agent, sim = sim_agent(registry=make_registry(), compaction=CompactionPolicy(window=WINDOW))
    store = open_store(tmp_path / "s.db")
    session = await agent.open(store, "long")
    await _drive(session, 11)
    assert not await _events(store, "history_compacted")
    before = session.records[-1]  # the parent's last call before the compaction
    entry = before.usage.read + before.usage.written
    result = await session.send(f"turn 11 {WORDS}")
    compactions = await _events(store, "history_compacted")
    assert len(compactions) == 1
    # the summary was written by a fork that read the parent's whole cached history
    children = await store.children("long")
    writer_id = compactions[0]["summarised_by"]
    assert writer_id in children
    writer = await store.load(writer_id)
    assert writer.role == "compaction"
    summary_call = writer.last_record
    assert summary_call is not None
    assert summary_call.usage.read == entry
    assert summary_call.usage.written == 0
    # the next call is a declared break with its reason, and reads tools+system only
    first = result.records[0]
    assert first.declared_break is not None
    assert first.declared_break.startswith("compaction: history at ")
    assert "of the 12,000-token context window" in first.declared_break
    shared = sim.outcomes[0].usage.written  # the first call wrote tools+system+turn 0
    assert 0 < first.usage.read < shared
    assert session.history[0].text.startswith(SUMMARY_HEADER)
    # later calls read the compacted prefix
    after = await session.send("and then?")
    assert after.records[0].usage.read == first.usage.read + first.usage.written
    assert after.records[0].declared_break is None
    # the replaced messages stay in the store
    assert compactions[0]["replaced"] == 23  # 11 turns, and the new message
    await store.close()


async def _events(store: Any, type_: str) -> list[dict[str, Any]]:
    return [json.loads(body) for _, t, _, body in await store.events("long") if t == type_]


async def test_a_resume_sends_the_compacted_history_byte_for_byte(tmp_path: Path) -> None:
    agent, sim = sim_agent(registry=make_registry(), compaction=CompactionPolicy(window=WINDOW))
    store = open_store(tmp_path / "s.db")
    session = await agent.open(store, "long")
    await _drive(session, 12)
    assert session.history[0].text.startswith(SUMMARY_HEADER)
    await session.send("one more after the compaction")
    # the same agent definition in fresh objects, with a simulator of its own: only the
    # store carries the session over
    again, sim2 = sim_agent(registry=make_registry(), compaction=CompactionPolicy(window=WINDOW))
    reopened = open_store(tmp_path / "s.db")
    resumed = await again.open(reopened, "long", create=False)
    assert resumed.history == session.history
    await session.send("next")
    await resumed.send("next")
    assert sim2.requests[-1] == sim.requests[-1]
    await store.close()
    await reopened.close()


async def test_compacting_when_the_cache_went_cold_writes_no_more(tmp_path: Path) -> None:
    """The same conversation with an idle gap past the TTL at 60% of the window: compacting
    then (the history is rewritten anyway) writes no more than waiting for the threshold."""

    async def run(idle_aware: bool) -> tuple[int, int]:
        clock = FrozenClock()
        policy = CompactionPolicy(window=WINDOW, idle_threshold=0.5 if idle_aware else 0.8)
        agent, _ = sim_agent(
            registry=make_registry(),
            clock=clock,
            compaction=policy,
            cache_policy=CachePolicy(keep_warm=TimePolicy(enabled=False)),
        )
        sink = MemorySink()
        session = agent.session(store=sink)
        await _drive(session, 8, clock)
        clock.advance(minutes=20)  # past the 5-minute TTL: the cache is cold
        await _drive(session, 14, clock)
        records = _records(sink)
        return sum(r.usage.written for r in records), len(_compactions(sink))

    cold_written, cold_compactions = await run(idle_aware=True)
    warm_written, warm_compactions = await run(idle_aware=False)
    assert cold_compactions >= 1
    assert warm_compactions >= 1
    assert cold_written <= warm_written


class FailingSummaries(RuleModel):
    """Answers like the rule model, except that a summary request fails."""

    def __init__(self, empty: bool = False) -> None:
        self.empty = empty
        self.failing = True

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        if self.failing and isinstance(last, UserMessage) and "about to be compacted" in last.text:
            if self.empty:
                return (TextBlock(text=" "),)
            raise InvalidRequest("summaries are down", provider="sim", status=500)
        return RuleModel.respond(self, request)


@pytest.mark.parametrize("empty", [False, True])
async def test_a_failing_summary_leaves_the_session_usable(empty: bool) -> None:
    model = FailingSummaries(empty=empty)
    agent, _ = sim_agent(
        model=model,
        registry=make_registry(),
        compaction=CompactionPolicy(window=WINDOW),
        max_tokens=500,
    )
    sink = MemorySink()
    session = agent.session(store=sink)
    await _drive(session, 12)  # past the threshold: each turn tries, fails, goes on
    assert not _compactions(sink)
    assert len(session.history) == 24
    assert not session.history[0].text.startswith(SUMMARY_HEADER)
    with pytest.raises(CompactionError, match="history is as it was"):
        await session.compact()
    model.failing = False
    await session.send("now it works")
    assert len(_compactions(sink)) == 1
    assert session.history[0].text.startswith(SUMMARY_HEADER)


async def test_a_turn_that_cannot_fit_fails_clearly_and_loses_nothing() -> None:
    model = FailingSummaries()
    agent, _ = sim_agent(
        model=model, registry=make_registry(), compaction=CompactionPolicy(window=WINDOW)
    )
    session = agent.session()
    await _drive(session, 11)
    kept = session.history
    with pytest.raises(CompactionError, match="does not fit the 12,000-token context window"):
        await session.send(f"turn 11 {WORDS}")
    assert session.history[: len(kept)] == kept


async def test_compact_on_request() -> None:
    agent, _ = sim_agent(registry=make_registry())
    sink = MemorySink()
    session = agent.session(store=sink)
    with pytest.raises(CompactionError, match="nothing to compact"):
        await session.compact()
    await _drive(session, 3)
    await session.compact(reason="the user asked")
    (event,) = _compactions(sink)
    assert event.reason == "the user asked"
    assert event.kept_from == 2  # all that fits the kept share stays: turns 2 and 3
    result = await session.send("go on")
    assert result.records[0].declared_break == "compaction: the user asked"


async def test_a_report_rebuilds_every_call_of_a_compacted_session(tmp_path: Path) -> None:
    from stoker.report.lineage import load_lineage

    agent, _ = sim_agent(registry=make_registry(), compaction=CompactionPolicy(window=WINDOW))
    store = open_store(tmp_path / "s.db")
    session = await agent.open(store, "long")
    await _drive(session, 14)
    lineage = await load_lineage(store, "long")
    assert {s.role for s in lineage.sessions} == {"main", "compaction"}
    assert lineage.sessions[0].title.startswith("turn 0 word")  # the first ask, not the summary
    assert len(lineage.calls) == 15
    assert all(c.request is not None for c in lineage.calls)  # each with the history it sent
    await store.close()
