"""Stored sessions as people look at them: lists, per-turn views, exports.

The library functions behind `stoker sessions ...`; they join the store (events) and the
wire values (messages, records) and never print.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from stoker.agent.loop import TurnResult
from stoker.cache.pricing import total_cost
from stoker.store.base import SqlEventStore
from stoker.wire.messages import AssistantMessage, Message, UserMessage, message_from_dict
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage


@dataclass(slots=True, kw_only=True)
class TurnView:
    """One user turn: what was asked, the final answer, every provider call it made, and
    the keep-warm requests (pings, seals) sent in the idle gap after it, kept apart."""

    number: int
    user: str
    answer: str = ""
    tools: list[str] = field(default_factory=list)
    records: list[CacheRecord] = field(default_factory=list)
    keep_warm: list[CacheRecord] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        """The turn's own calls (keep-warm apart: `keep_warm_usage`)."""
        return Usage.total(r.usage for r in self.records)

    @property
    def cost_usd(self) -> float | None:
        return total_cost(r.cost_usd for r in self.records)

    def result(self) -> TurnResult:
        """The turn as `send` returned it (for a retry whose response was lost)."""
        return TurnResult(
            text=self.answer,
            exit="answered",
            iterations=len(self.records),
            records=tuple(self.records),
        )

    @property
    def keep_warm_usage(self) -> Usage:
        return Usage.total(r.usage for r in self.keep_warm)

    @property
    def keep_warm_cost_usd(self) -> float | None:
        return total_cost(r.cost_usd for r in self.keep_warm)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionView:
    id: str
    role: str
    model: str
    turns: tuple[TurnView, ...]
    rebases: tuple[str, ...]

    @property
    def usage(self) -> Usage:
        """Every call, keep-warm included: what the session was billed."""
        return Usage.total(u for t in self.turns for u in (t.usage, t.keep_warm_usage))

    @property
    def cost_usd(self) -> float | None:
        return total_cost(c for t in self.turns for c in (t.cost_usd, t.keep_warm_cost_usd))

    @property
    def keep_warm(self) -> tuple[CacheRecord, ...]:
        return tuple(r for t in self.turns for r in t.keep_warm)


def answered(history: Sequence[Message], text: str) -> bool:
    """Whether the history's last turn is the user's `text` and the model answered it."""
    last = history[-1] if history else None
    if not isinstance(last, AssistantMessage) or last.tool_calls:
        return False
    asked = next((m for m in reversed(history) if isinstance(m, UserMessage) and m.text), None)
    return asked is not None and asked.prompt == text


async def show_session(store: SqlEventStore, session_id: str) -> SessionView:
    """History, tokens and cost per turn, rebuilt from the session's events."""
    turns: list[TurnView] = []
    rebases: list[str] = []
    model = ""
    role = "main"
    for _, type_, _, body in await store.events(session_id):
        data = json.loads(body)
        if type_ == "session_created":
            role = data.get("role", data.get("kind", "main"))
            model = json.loads(data["prefix"])["params"]["model"]
        elif type_ == "prefix_rebased":
            rebases.append(data["reason"])
        elif type_ == "message_appended":
            message = message_from_dict(data["message"])
            if isinstance(message, UserMessage) and not message.tool_results:
                turns.append(TurnView(number=len(turns) + 1, user=message.prompt))
            elif isinstance(message, AssistantMessage) and turns:
                turns[-1].tools += [c.name for c in message.tool_calls]
                if message.text:
                    turns[-1].answer = message.text
        elif type_ == "cache_recorded" and turns:
            record = CacheRecord.from_dict(data)
            (turns[-1].records if record.purpose == "turn" else turns[-1].keep_warm).append(record)
    return SessionView(
        id=session_id, role=role, model=model, turns=tuple(turns), rebases=tuple(rebases)
    )


async def export_session(store: SqlEventStore, session_id: str) -> list[str]:
    """Every event as one JSON line: seq, type, created_at and the event itself."""
    return [
        json.dumps(
            {"seq": seq, "type": type_, "created_at": created, "event": json.loads(body)},
            ensure_ascii=False,
        )
        for seq, type_, created, body in await store.events(session_id)
    ]
