"""Children never pay a 1-hour write (issue 41): a parent that writes 1-hour entries
itself (`system_ttl="1h"`, with or without `message_ttl="1h"`) delegates to sub-agents and
is reviewed; every child call writes 0 tokens at the 1-hour price, and reads the whole
prefix its parent cached. Checked on the simulator with every call held to the best
read it could make (`stoker.bench.fuzz_audit.Auditor`)."""

from __future__ import annotations

import pytest

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.bench.fuzz import ThinkingModel
from stoker.bench.fuzz_audit import Auditor
from stoker.bench.workload import SYSTEM, TOOLS
from stoker.cache.planner import CachePolicy, anchor_ttl, child_policy, plan_anthropic
from stoker.clock import FrozenClock
from stoker.providers.base import CallContext, Completion
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.blocks import TextBlock
from stoker.wire.messages import AssistantMessage, UserMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

POLICIES = {
    "message_ttl=1h": CachePolicy(system_ttl="1h", message_ttl="1h"),
    "system_ttl=1h": CachePolicy(system_ttl="1h"),
}


class Calls(Auditor):
    """The audited simulator, keeping each call's session and usage in order."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.seen: list[tuple[str, Usage]] = []

    async def complete(self, request: Request, context: CallContext) -> Completion:
        done = await super().complete(request, context)
        self.seen.append((context.session_id, done.usage))
        return done


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
async def test_sub_agents_and_a_review_write_nothing_at_one_hour(policy: CachePolicy) -> None:
    clock = FrozenClock()
    calls = Calls(SimProvider(engine=SimEngine(model=ThinkingModel()), clock=clock))
    agent = Agent(
        "claude-sonnet-4-6",
        provider=calls,
        tools=[*TOOLS, delegate_tool()],
        system=SYSTEM,
        clock=clock,
        max_iterations=40,
        cache_policy=policy,
    )
    session = agent.session()
    await session.send("hello")
    await session.send("Please delegate the checks")
    await session.fork(role="review").send("Anything worth remembering?")
    children = [(sid, u) for sid, u in calls.seen if sid != session.id]
    roles = sorted({sid.rsplit(".", 1)[1].split("-")[0] for sid, _ in children})
    assert roles == ["review", "subagent"]
    assert [u.written_1h for _, u in children] == [0] * len(children)
    assert sum(u.written_1h for sid, u in calls.seen if sid == session.id) > 0  # the parent's
    # every child call read the whole prefix its parent cached before it
    cached = 0
    for sid, usage in calls.seen:
        if sid == session.id:
            cached = usage.read + usage.written
        else:
            assert usage.read >= cached, sid
    assert calls.violations == []


def _history(turns: int) -> list[UserMessage | AssistantMessage]:
    out: list[UserMessage | AssistantMessage] = []
    for i in range(turns):
        out.append(UserMessage(content=(TextBlock(text=f"question {i}"),)))
        out.append(AssistantMessage(content=(TextBlock(text=f"answer {i}"),)))
    return out


def test_a_childs_marker_on_a_held_one_hour_entry_sits_at_its_end_at_five_minutes() -> None:
    parent = CachePolicy(system_ttl="1h", message_ttl="1h")
    history = _history(30)  # the held entry at message 4 is far past the lookback
    messages = [*history, UserMessage(content=(TextBlock(text="a child's question"),))]
    anchor = (len(history) - 1, 0)
    found = plan_anthropic(
        messages,
        previous=anchor,
        policy=child_policy(parent),
        anchor=anchor,
        held=(4, 0),
        anchored_ttl=anchor_ttl(parent),
    )
    marks = [(b.message, b.block, b.ttl) for b in found.breakpoints]
    assert marks == [
        (None, -1, "5m"),
        (4, 0, "5m"),  # exactly at the held entry's end: read, not written
        (anchor[0], 0, "5m"),
        (len(history), 0, "5m"),
    ]


def test_a_parent_on_five_minute_entries_still_gets_a_one_hour_anchor() -> None:
    """The default policy: the child's anchor is the parent's one long entry (to seal)."""
    assert anchor_ttl(CachePolicy()) == "1h"
    assert child_policy(CachePolicy()) == CachePolicy()
    assert anchor_ttl(CachePolicy(system_ttl="1h")) == "5m"
    assert child_policy(CachePolicy(system_ttl="1h", message_ttl="1h")) == CachePolicy()
