"""Stored sessions as people look at them: lists, per-turn views, exports.

The library functions behind `stoker sessions ...`; they join the store (events) and the
wire values (messages, records) and never print.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stoker.agent.loop import TurnResult
from stoker.cache.models import model_info
from stoker.cache.pricing import RecordTotals, total_cost, uncached_cost_usd
from stoker.errors import ConfigError
from stoker.store.base import SqlEventStore
from stoker.wire.figures import json_ratio, json_usd
from stoker.wire.messages import AssistantMessage, Message, UserMessage, message_from_dict
from stoker.wire.record import CacheRecord
from stoker.wire.stored import SessionSummary
from stoker.wire.usage import Usage


@dataclass(slots=True, kw_only=True)
class TurnView(RecordTotals):
    """One user turn: what was asked, the final answer, every provider call it made, and
    the keep-warm requests (pings, seals) sent in the idle gap after it, kept apart
    (`usage` and `cost_usd` are the turn's own calls; `keep_warm_usage` the rest)."""

    number: int
    user: str
    answer: str = ""
    tools: list[str] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)  # "approved add_note(...) by user:x"
    records: list[CacheRecord] = field(default_factory=list)
    keep_warm: list[CacheRecord] = field(default_factory=list)

    def result(self) -> TurnResult[Any]:
        """The turn as `send` returned it (for a retry whose response was lost)."""
        return TurnResult(
            text=self.answer,
            exit="answered",
            iterations=len(self.records),
            records=tuple(self.records),
            output=self.answer,
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

    @property
    def records(self) -> tuple[CacheRecord, ...]:
        """Every call in order: each turn's own, then the keep-warm requests after it."""
        return tuple(r for t in self.turns for r in (*t.records, *t.keep_warm))


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """What a set of calls cost and what caching saved, in money.

    Sums run over the calls whose price is known; the others are counted in `unpriced`
    and left out of both sums, so one call on a model without a price never hides what
    the rest cost (a total of "unknown" helps nobody), and the saving compares like with
    like: the same priced calls' tokens, all at the base input price.
    """

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    no_cache_usd: float = 0.0
    unpriced: int = 0

    @property
    def savings_usd(self) -> float:
        return self.no_cache_usd - self.cost_usd

    @classmethod
    def of(cls, records: Iterable[CacheRecord]) -> Spend:
        total = cls()
        for r in records:
            baseline = _no_cache_usd(r)
            if r.cost_usd is None or baseline is None:
                total += cls(calls=1, usage=r.usage, unpriced=1)
            else:
                total += cls(calls=1, usage=r.usage, cost_usd=r.cost_usd, no_cache_usd=baseline)
        return total

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            calls=self.calls + other.calls,
            usage=self.usage + other.usage,
            cost_usd=self.cost_usd + other.cost_usd,
            no_cache_usd=self.no_cache_usd + other.no_cache_usd,
            unpriced=self.unpriced + other.unpriced,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "usage": usage_dict(self.usage),
            "hit_ratio": json_ratio(self.usage.hit_ratio),
            "cost_usd": json_usd(self.cost_usd),
            "no_cache_usd": json_usd(self.no_cache_usd),
            "savings_usd": json_usd(self.savings_usd),
            "unpriced_calls": self.unpriced,
        }


def _no_cache_usd(record: CacheRecord) -> float | None:
    try:
        return uncached_cost_usd(record.usage, model_info(record.model))
    except ConfigError:  # a model Stoker has no facts for: no price either
        return None


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
        elif type_ == "history_compacted":  # turns keep what was said; the break is listed
            rebases.append(f"compaction: {data['reason']}")
        elif type_ == "message_appended":
            message = message_from_dict(data["message"])
            if isinstance(message, UserMessage) and not message.tool_results:
                turns.append(TurnView(number=len(turns) + 1, user=message.prompt))
            elif isinstance(message, AssistantMessage) and turns:
                turns[-1].tools += [c.name for c in message.tool_calls]
                if message.text:
                    turns[-1].answer = message.text
        elif type_ == "approval_decided" and turns:
            verdict = "approved" if data["approved"] else "denied"
            why = f" ({data['reason']})" if data.get("reason") else ""
            turns[-1].approvals.append(f"{verdict} {data['summary']} by {data['by']}{why}")
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


def usage_dict(usage: Usage) -> dict[str, int]:
    """The buckets, plus the two sums people ask for first."""
    return {**usage.to_dict(), "written": usage.written, "input_total": usage.input_total}


def record_dict(record: CacheRecord, *, turn: int | None = None) -> dict[str, Any]:
    """One provider call: its buckets, its cost, and why it read what it read."""
    return {
        "seq": record.seq,
        "turn": turn,
        "role": record.role,
        "purpose": record.purpose,
        "model": record.model,
        "started_at": record.started_at,
        "usage": usage_dict(record.usage),
        "cost_usd": json_usd(record.cost_usd),
        "declared_break": record.declared_break,
        "fallback_of": record.fallback_of,  # the primary model, when a fallback answered
        "explanation": {
            "verdict": record.explanation.verdict,
            "text": str(record.explanation),
            "slot": record.explanation.slot,
        },
    }


def summary_dict(summary: SessionSummary, *, short_id: str) -> dict[str, Any]:
    """A listed session, with the short id that names it alone in its store
    (`stoker.session_ids`)."""
    return {
        "id": summary.id,
        "short_id": short_id,
        "role": summary.role,
        "parent_id": summary.parent_id,
        "model": summary.model,
        "title": summary.title,
        "messages": summary.message_count,
        "created_at": summary.created_at,
        "updated_at": summary.updated_at,
    }


def view_dict(view: SessionView) -> dict[str, Any]:
    """A whole session as `stoker sessions show` tells it: turns with their calls, the
    keep-warm requests after each, declared breaks and totals."""
    return {
        "id": view.id,
        "role": view.role,
        "model": view.model,
        "turns": [
            {
                "number": t.number,
                "user": t.user,
                "answer": t.answer,
                "tools": t.tools,
                "approvals": t.approvals,
                "usage": usage_dict(t.usage),
                "cost_usd": json_usd(t.cost_usd),
                "requests": [record_dict(r, turn=t.number) for r in t.records],
                "keep_warm": [record_dict(r, turn=t.number) for r in t.keep_warm],
            }
            for t in view.turns
        ],
        "rebases": list(view.rebases),
        "usage": usage_dict(view.usage),
        "hit_ratio": json_ratio(view.usage.hit_ratio),
        "cost_usd": json_usd(view.cost_usd),
    }
