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
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from stoker.agent.loop import TurnResult
from stoker.errors import SpawnDepthExceeded, ToolError
from stoker.tools import Tool, ToolContext, tool

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


SubAgentRun = Callable[[str, int, Callable[[], object] | None], Awaitable[TurnResult[Any]]]
"""Fork a sub-agent, send it the task and return its turn: (task, max_iterations,
called once its first response has begun)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delegator:
    """What a session running tool calls offers to the `delegate` tool."""

    history_length: Callable[[], int]
    fanout: FanOut
    subagent: SubAgentRun
    toolkit_brief: Callable[[str], str] | None  # None: no toolkits are connected


_running: ContextVar[Delegator | None] = ContextVar("stoker_running_session", default=None)
_depth: ContextVar[int] = ContextVar("stoker_spawn_depth", default=0)


@contextlib.contextmanager
def running(delegator: Delegator) -> Iterator[None]:
    """Tool calls made inside the block belong to the session `delegator` speaks for.
    Tasks copy context variables, so concurrent sub-agents each see their own."""
    token = _running.set(delegator)
    try:
        yield
    finally:
        _running.reset(token)


def spawn_depth() -> int:
    """0 in a root turn; n inside a sub-agent n levels down."""
    return _depth.get()


@contextlib.contextmanager
def _at_depth(depth: int) -> Iterator[None]:
    token = _depth.set(depth)
    try:
        yield
    finally:
        _depth.reset(token)


def _task_message(goal: str, toolkit: str, parent: Delegator) -> str:
    using = ""
    if toolkit:
        if parent.toolkit_brief is None:
            raise ToolError("no toolkits are connected to this agent; leave toolkit empty")
        using = f"\nUse the toolkit {toolkit!r} for it. {parent.toolkit_brief(toolkit)}"
    return (
        f"You are a sub-agent. Do this task and reply with only the result, briefly:\n{goal}{using}"
    )


async def run_delegate(goal: str, toolkit: str, config: DelegateConfig) -> str:
    parent = _running.get()
    if parent is None:
        raise ToolError("delegate can only run inside a session's turn")
    depth = spawn_depth() + 1
    if depth > config.max_depth:
        raise SpawnDepthExceeded(depth, config.max_depth)
    task = _task_message(goal, toolkit, parent)
    with _at_depth(depth):
        mark = parent.history_length()
        first = parent.fanout.claim(mark)
        if first is None:
            await parent.fanout.wait(mark, config.first_response_timeout)
        try:
            result = await parent.subagent(
                task, config.max_iterations, first.set if first is not None else None
            )
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
