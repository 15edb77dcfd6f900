"""Regressions an independent check of Stoker's cache behaviour found (issue "No cache
break left"), each reproduced in a few lines and written before its fix."""

from __future__ import annotations

import dataclasses
from typing import Any

from stoker.agent.agent import Agent
from stoker.cache.planner import CachePolicy
from stoker.providers.sim.model import Call, ScriptedModel
from stoker.store.base import SqlEventStore
from stoker.tools import tool
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
    tails nobody comes back to. (What they write at the parent's history end is for the
    parent, and stays a 1-hour entry: see `plan_anthropic`'s anchor.)"""
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
