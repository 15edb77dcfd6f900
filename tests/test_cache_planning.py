"""The planner against the exact accountant: breakpoints that make long turns hit."""

from __future__ import annotations

from stoker.cache.accounting import AnthropicAccountant
from stoker.cache.planner import plan_anthropic
from stoker.clock import FrozenClock
from stoker.providers.sim.model import ScriptedModel
from stoker.wire.blocks import TextBlock
from stoker.wire.dialects import anthropic
from stoker.wire.messages import AssistantMessage, user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Breakpoint, Request
from tests.helpers import SYSTEM, make_registry, sim_agent

PREFIX = Prefix(params=CacheParams(model="claude-sonnet-4-6"), system=SYSTEM)
TURN1 = (user_text("start " * 50),)
# One turn that appends 25 text blocks (no tool runs to collapse) and a new user message.
TURN2 = (
    *TURN1,
    AssistantMessage(content=tuple(TextBlock(text=f"part {i} " * 5) for i in range(25))),
    user_text("next"),
)


def _account(acct: AnthropicAccountant, messages: tuple, bps: tuple, at: float):  # type: ignore[no-untyped-def, type-arg]
    request = Request(prefix=PREFIX, messages=messages, breakpoints=bps)
    return acct.account(anthropic.render_request(request), at=at)


def test_25_block_turn_misses_with_one_rolling_breakpoint() -> None:
    acct = AnthropicAccountant()
    first = _account(acct, TURN1, (Breakpoint(message=0, block=0),), at=0.0)
    second = _account(acct, TURN2, (Breakpoint(message=2, block=0),), at=10.0)
    assert first.usage.written == first.total_tokens
    assert second.usage.read == 0
    assert [f.cause for f in second.misses] == ["lookback"]


def test_25_block_turn_hits_with_the_planners_intermediate_breakpoint() -> None:
    acct = AnthropicAccountant()
    p1 = plan_anthropic(TURN1, previous=None)
    first = _account(acct, TURN1, p1.breakpoints, at=0.0)
    p2 = plan_anthropic(TURN2, previous=p1.rolling)
    assert p2.breakpoints == (
        Breakpoint(message=None),
        Breakpoint(message=0, block=0),
        Breakpoint(message=2, block=0),
    )
    second = _account(acct, TURN2, p2.breakpoints, at=10.0)
    assert second.usage.read == first.usage.written
    assert second.usage.written == second.total_tokens - first.total_tokens


async def test_a_session_turn_with_25_blocks_reads_the_previous_write() -> None:
    def many_blocks(request):  # type: ignore[no-untyped-def]
        return tuple(TextBlock(text=f"part {i}") for i in range(25))

    agent, _ = sim_agent(
        model=ScriptedModel(["hi", many_blocks, "ok"]),
        registry=make_registry(),
        clock=FrozenClock(),
    )
    session = agent.session()
    await session.send("one")
    await session.send("two")
    await session.send("three")
    last = session.records[-1]
    assert len(last.breakpoints) == 3
    assert last.explanation.verdict == "hit"
    previous = session.records[-2].usage
    assert last.usage.read == previous.read + previous.written
