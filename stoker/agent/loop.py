"""The turn loop: model, then tools, then model again, until an answer or the budget ends.

It reads in one sitting on purpose. Exits are values (`answered`, `budget_exhausted`);
a tool the policy denies, or arguments the model got wrong, come back to the model as
tool_result errors and never end the turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from stoker.agent.context import running
from stoker.cache.pricing import total_cost
from stoker.tools import run_tool_calls
from stoker.wire.messages import UserMessage, tool_results
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage

if TYPE_CHECKING:
    from stoker.agent.session import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """What a turn produced: the final text, how it ended, and what it cost."""

    text: str
    exit: Literal["answered", "budget_exhausted"]
    iterations: int
    records: tuple[CacheRecord, ...]

    @property
    def usage(self) -> Usage:
        return Usage.total(r.usage for r in self.records)

    @property
    def cost_usd(self) -> float | None:
        return total_cost(r.cost_usd for r in self.records)


def _status(session: Session, text: str) -> None:
    if session.callbacks.on_status is not None:
        session.callbacks.on_status(text)


async def run_turn(session: Session, message: UserMessage) -> TurnResult:
    """Append `message` and loop until the model answers without calling tools."""
    await session.append(message)
    records: list[CacheRecord] = []
    for iteration in range(1, session.max_iterations + 1):
        _status(session, f"model call {iteration}")
        completion, record = await session.call_model()
        records.append(record)
        reply = completion.message
        await session.append(reply)
        calls = reply.tool_calls
        if not calls:
            return TurnResult(
                text=reply.text, exit="answered", iterations=iteration, records=tuple(records)
            )
        _status(session, "running " + ", ".join(c.name for c in calls))
        with running(session):
            results = await run_tool_calls(
                calls,
                session.tools,
                context_factory=lambda call: session.tool_context(call.id),
                policy=session.policy,
                on_progress=session.callbacks.on_tool,
            )
        await session.append(tool_results(results))
    return TurnResult(
        text="",
        exit="budget_exhausted",
        iterations=session.max_iterations,
        records=tuple(records),
    )
