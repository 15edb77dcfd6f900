"""Sub-agents that share the parent's cache.

A child is a fork: it sends the parent's exact prefix and history, and its task goes in
its first user message, never in its system prompt, so every child reads the parent's
cached tools+system+history. The `delegate` tool's schema is fixed (the toolkit is an
argument, not part of its name or an enum), so tools[] never changes when toolkits come
and go. Depth lives in a context variable: past the limit the call fails before any
provider call, and neither a return nor a raise can leak a child's depth to its parent.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stoker.agent.context import at_depth, running_session, spawn_depth
from stoker.errors import SpawnDepthExceeded, ToolError
from stoker.tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from stoker.agent.session import Session

if TYPE_CHECKING:
    pass

MAX_SPAWN_DEPTH = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegateConfig:
    max_depth: int = MAX_SPAWN_DEPTH
    max_iterations: int = 50
    result_chars: int = 4000
    first_response_timeout: float = 30.0


@dataclass(slots=True)
class FanOut:
    """Siblings started together wait until the first one's response has begun, so the
    cache entry it writes is readable (an entry is visible only once a response starts)."""

    started: dict[int, asyncio.Event] = field(default_factory=dict)

    def claim(self, turn_mark: int) -> asyncio.Event | None:
        """The event to set (first child of this fan-out), or None for a sibling."""
        if turn_mark in self.started:
            return None
        self.started[turn_mark] = asyncio.Event()
        return self.started[turn_mark]

    async def wait(self, turn_mark: int, limit: float) -> None:
        # Better a cold read than a stuck turn: give up waiting after `limit` seconds.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.started[turn_mark].wait(), limit)


def _task_message(goal: str, toolkit: str, parent: Session) -> str:
    using = ""
    if toolkit:
        if parent.toolkits is None:
            raise ToolError("no toolkits are connected to this agent; leave toolkit empty")
        using = f"\nUse the toolkit {toolkit!r} for it. {parent.toolkits.brief(toolkit)}"
    return (
        f"You are a sub-agent. Do this task and reply with only the result, briefly:\n{goal}{using}"
    )


async def run_delegate(goal: str, toolkit: str, config: DelegateConfig) -> str:
    parent = running_session()
    if parent is None:
        raise ToolError("delegate can only run inside a session's turn")
    depth = spawn_depth() + 1
    if depth > config.max_depth:
        raise SpawnDepthExceeded(depth, config.max_depth)
    instruction = _task_message(goal, toolkit, parent)
    with at_depth(depth):
        mark = len(parent.history)
        first = parent.fanout.claim(mark)
        if first is None:
            await parent.fanout.wait(mark, config.first_response_timeout)
        child = parent.fork(
            instruction=instruction,
            kind="subagent",
            max_iterations=config.max_iterations,
        )
        if first is not None:
            child.on_first_response = first.set
        try:
            result = await child.run()
        finally:
            if first is not None:
                first.set()
    answer = result.text or f"(the sub-agent stopped: {result.exit})"
    if len(answer) > config.result_chars:
        answer = answer[: config.result_chars] + " …(truncated)"
    return answer


def delegate_tool(config: DelegateConfig | None = None) -> Tool:
    """The `delegate` tool; its schema is the same whatever toolkits are connected."""
    cfg = config or DelegateConfig()

    @tool(name="delegate")
    async def delegate(goal: str, toolkit: str = "", *, context: ToolContext) -> str:
        """Hand a self-contained task to a sub-agent that already knows this conversation,
        and get its answer back. Several delegate calls in one reply run in parallel.

        Args:
            goal: The task, with what the sub-agent needs to finish it on its own.
            toolkit: Name of a connected toolkit the sub-agent should use, or "" for none.
        """
        return await run_delegate(goal, toolkit, cfg)

    return delegate
