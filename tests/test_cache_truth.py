"""Regressions an independent check of Stoker's cache behaviour found (issue "No cache
break left"), each reproduced in a few lines and written before its fix."""

from __future__ import annotations

import dataclasses
from typing import Any

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.session import Session
from stoker.bench.fuzz import ThinkingModel
from stoker.bench.fuzz_audit import Auditor, disagreement
from stoker.bench.workload import SYSTEM, TOOLS
from stoker.cache.explain import explain
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy
from stoker.clock import FrozenClock
from stoker.providers.base import CallContext
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import Call, ScriptedModel
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.tools import tool
from stoker.wire.blocks import TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Breakpoint, Request
from tests.helpers import sim_agent


@tool
def ticket(text: str) -> str:
    """Open a ticket.

    Args:
        text: What the ticket says.
    """
    return f"ticket opened: {text}"


@tool
def lookup(text: str) -> str:
    """Look something up.

    Args:
        text: What to look up.
    """
    return f"found {text}"


def _same_agent(agent: Agent, **changes: Any) -> Agent:
    fields = {f.name: getattr(agent, f.name) for f in dataclasses.fields(agent) if f.init}
    return type(agent)(**{**fields, **changes})


async def test_a_fork_runs_a_tool_its_parent_got_by_a_declared_rebase() -> None:
    """Regression: the fork advertised the tool byte for byte but answered "unavailable"."""
    agent, provider = sim_agent(tools=[lookup])
    session = agent.session()
    await session.send("hello")
    await session.rebase(reason="a ticket tool for this session", tools=[lookup, ticket])
    for role in ("fork", "review"):
        model = ScriptedModel([Call(name="ticket", arguments={"text": "disk full"}), "done"])
        provider.engine.model = model
        child = session.fork(role=role)
        result = await child.send("open a ticket")
        results = [b for m in child.history for b in getattr(m, "tool_results", ())]
        assert [r.content for r in results] == ["ticket opened: disk full"], role
        assert result.text == "done"


async def test_children_write_their_own_tails_at_five_minutes() -> None:
    """Regression: sub-agents and reviews inherited message_ttl="1h" (twice the price) for
    tails nobody comes back to. (A parent on 1-hour entries holds its own: what they
    write at its history's end is a 5-minute entry, see `anchor_ttl`.)"""
    policy = CachePolicy(system_ttl="1h", message_ttl="1h")
    agent, provider = sim_agent(cache_policy=policy)
    session = agent.session()
    await session.send("hello there")
    parent = session.records[-1]
    assert parent.usage.written_1h > 0
    child = session.fork(role="review")
    result = await child.send("anything worth remembering?")
    first = result.records[0]
    assert first.usage.read > 0  # it reads what the parent cached
    assert first.usage.written_5m > 0  # and writes its own tail at 5 minutes
    sent = provider.requests[-1]["messages"]
    ttls = [
        b["cache_control"].get("ttl", "5m")
        for m in sent
        for b in m["content"]
        if isinstance(b, dict) and "cache_control" in b
    ]
    assert ttls[-1] == "5m"


async def test_reconciling_tools_twice_removes_an_agent_tool_once(store: SqlEventStore) -> None:
    """Regression: a tool the agent itself defines, added by one `tools="reconcile"` and
    dropped by the next, stayed in tools[] as "unavailable" (as if its toolset were down)
    and the call declared a break "added [], removed []" though it read everything: the
    first reconcile did not update the stored set of the agent's own tools."""
    agent, _ = sim_agent(tools=[lookup])
    session = await agent.open(store, "twice")
    await session.send("hello")
    wider = _same_agent(agent, tools=[lookup, ticket])
    first = await wider.open(store, "twice", create=False, tools="reconcile")
    assert first.prefix.tool_names == ("lookup", "ticket")
    await first.send("after adding")
    again = await _same_agent(agent).open(store, "twice", create=False, tools="reconcile")
    assert again.prefix.tool_names == ("lookup",)  # removed, not kept as a stand-in
    result = await again.send("after removing")
    first_call = result.records[0]
    assert first_call.explanation.verdict == "declared"
    assert first_call.declared_break == "tools reconciled on resume: added [], removed ['ticket']"
    third = await _same_agent(agent).open(store, "twice", create=False, tools="reconcile")
    steady = await third.send("and again")
    assert steady.records[0].declared_break is None  # nothing changed: nothing declared
    assert steady.records[0].explanation.verdict == "hit"


def _workload_agent(
    clock: FrozenClock, *, model: str = "claude-sonnet-4-6", thinking: int | None = None
) -> tuple[Agent, Auditor]:
    """The benchmarks' agent (eight tools and `delegate`) on a simulator whose every call
    is held to the best read it could make (`stoker.bench.fuzz.Auditor`)."""
    auditor = Auditor(SimProvider(engine=SimEngine(model=ThinkingModel()), clock=clock))
    agent = Agent(
        model,
        provider=auditor,
        tools=[*TOOLS, delegate_tool()],
        system=SYSTEM,
        clock=clock,
        thinking_budget=thinking,
        max_iterations=40,
    )
    return agent, auditor


async def _delegated_then_idle() -> tuple[Session, Auditor]:
    """A parent whose sub-agents left a 1-hour anchor, then 12 steps and 10 idle minutes:
    that anchor is now past the 20-position lookback from the parent's breakpoints."""
    clock = FrozenClock()
    agent, auditor = _workload_agent(clock)
    session = agent.session()
    await session.send("Please delegate the checks")
    await session.send("Work on it: run 12 steps")
    clock.advance(600)
    return session, auditor


async def test_a_parent_reads_the_hour_entry_its_sub_agents_left_past_the_lookback() -> None:
    """Regression: sub-agents anchor the parent's history with a 1-hour entry; after a
    12-step loop and 10 idle minutes that entry is past the 20-position lookback from the
    parent's breakpoints, and the parent read only its tools and system prompt."""
    session, auditor = await _delegated_then_idle()
    result = await session.send("Thanks.")
    entries = auditor.sim.engine.anthropic.entries(auditor.sim.workspace)
    anchors = [e.tokens for e in entries.values() if e.ttl == "1h"]
    assert result.records[0].usage.read == max(anchors)  # the sub-agents' anchor
    assert auditor.violations == []


async def test_the_explanation_names_a_live_entry_left_past_the_lookback() -> None:
    """Regression: a call whose breakpoints could not reach a live 1-hour entry (and whose
    newer 5-minute entry had expired) was explained as "expired" only."""
    session, auditor = await _delegated_then_idle()
    history = session.history
    user = UserMessage(content=(TextBlock(text="Thanks."),))
    # what the planner placed before the fix: tools+system and the newest block only
    request = Request(
        prefix=session.prefix,
        messages=(*history, user),
        breakpoints=(Breakpoint(message=None), Breakpoint(message=len(history), block=0)),
    )
    done = await auditor.sim.complete(request, CallContext(session_id=session.id))
    entries = auditor.sim.engine.anthropic.entries(auditor.sim.workspace)
    anchor = max(e.tokens for e in entries.values() if e.ttl == "1h")
    assert 0 < done.usage.read < anchor
    why = explain(
        Request(prefix=session.prefix, messages=history),
        request,
        usage=done.usage,
        facts=done.facts,
        gap_seconds=600.0,
        previous_cached=session.records[-1].usage.read + session.records[-1].usage.written,
    )
    assert why.verdict == "lookback"
    assert f"{anchor:,}-token" in why.detail
    assert "lookback" in why.detail


async def test_a_forks_first_call_after_its_siblings_entry_expired_says_expired() -> None:
    """Regression: a fork of a session that had made no call of its own, sent after its
    sibling's entries expired, was labelled `first`."""
    clock = FrozenClock()
    agent, _ = _workload_agent(clock)
    session = agent.session()
    first = await session.fork(role="fork").send("Anything worth remembering?")
    assert first.records[0].explanation.verdict == "first"
    clock.advance(400)
    second = await session.fork(role="review").send("Anything to save?")
    assert second.records[0].usage.read == 0
    assert second.records[0].explanation.verdict == "expired"


async def test_a_sessions_first_call_after_its_forks_entry_expired_says_expired() -> None:
    """Regression (issue 41): a session forked before its own first call, the fork wrote
    the shared prefix, 5 minutes passed; the session's first call read nothing and was
    labelled `first` ("first call of this session"), though a live entry for its prefix
    had existed and expired."""
    clock = FrozenClock()
    agent, auditor = _workload_agent(clock)
    session = agent.session()
    await session.fork(role="fork").send("Anything worth remembering?")
    entries = auditor.sim.engine.anthropic.entries(auditor.sim.workspace)
    shared = min(e.tokens for e in entries.values())  # the tools and system prompt
    clock.advance(301)
    result = await session.send("hello")
    call = result.records[0]
    assert call.usage.read == 0
    assert call.explanation.verdict == "expired"
    assert call.explanation.classification == "first call"
    assert f"{shared:,}-token prefix expired" in call.explanation.detail
    assert "keep-warm ping" in call.explanation.detail  # the fix
    assert f"this call wrote {call.usage.written:,} tokens, up to $" in call.explanation.detail
    (judged,) = auditor.ledger.judgements[session.id]
    assert disagreement(judged, call) is None  # the usage alone says expired too


async def test_what_a_thinking_stripping_model_could_never_read_is_no_expiry() -> None:
    """Regression: on a model that drops earlier thinking, the tail the previous call
    wrote with its thinking can never be read by the next turn; after an idle gap the
    call that read everything it could was labelled `expired` for the difference."""
    clock = FrozenClock()
    agent, auditor = _workload_agent(clock, model="claude-sonnet-4-5", thinking=1024)
    assert model_info("claude-sonnet-4-5").strips_thinking
    session = agent.session()
    await session.send("hello")
    await session.send("Please delegate the checks")
    clock.advance(400)
    result = await session.send("Thanks.")
    call = result.records[0]
    assert auditor.violations == []  # it read everything it could
    assert call.usage.read > 0
    assert call.explanation.verdict == "hit", call.explanation
    assert "drops earlier thinking" in call.explanation.detail
