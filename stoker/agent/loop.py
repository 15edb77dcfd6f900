"""The turn loop: model, then tools, then model again, until an answer or the budget ends.

It reads in one sitting on purpose. Exits are values (`answered`, `budget_exhausted`);
a tool the policy denies, or arguments the model got wrong, come back to the model as
tool_result errors and never end the turn. The loop knows a session only as `TurnSteps`,
the few things a turn may do to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from stoker.cache.pricing import RecordTotals
from stoker.providers.base import Completion
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock
from stoker.wire.messages import Message, UserMessage, tool_results
from stoker.wire.record import CacheRecord

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult(RecordTotals, Generic[T]):
    """What a turn produced: the final text, how it ended, and what it cost.

    `output` is the answer as the type the turn asked for (`send(..., output=Invoice)`),
    validated; the text itself when it asked for none; None when the turn ended without
    an answer."""

    text: str
    exit: Literal["answered", "budget_exhausted"]
    iterations: int
    records: tuple[CacheRecord, ...]
    notice: str = ""  # what the caller should know, e.g. that the previous turn was cut off
    output: T | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSteps:
    """What a turn may do to its session, handed to the loop by the session itself."""

    append: Callable[[Message], Awaitable[None]]
    call_model: Callable[[], Awaitable[tuple[Completion, CacheRecord]]]
    run_tools: Callable[[Sequence[ToolUseBlock]], Awaitable[list[ToolResultBlock]]]
    status: Callable[[str], object]
    max_iterations: int


async def run_turn(steps: TurnSteps, message: UserMessage | None) -> TurnResult[Any]:
    """Append `message` and loop until the model answers without calling tools; with
    None, finish a turn the history already holds (one that was cut off)."""
    if message is not None:
        await steps.append(message)
    records: list[CacheRecord] = []
    for iteration in range(1, steps.max_iterations + 1):
        steps.status(f"model call {iteration}")
        completion, record = await steps.call_model()
        records.append(record)
        reply = completion.message
        await steps.append(reply)
        calls = reply.tool_calls
        if not calls:
            return TurnResult(
                text=reply.text,
                exit="answered",
                iterations=iteration,
                records=tuple(records),
                output=reply.text,
            )
        steps.status("running " + ", ".join(c.name for c in calls))
        await steps.append(tool_results(await steps.run_tools(calls)))
    return TurnResult(
        text="", exit="budget_exhausted", iterations=steps.max_iterations, records=tuple(records)
    )
