"""The JSON the gateway answers with, built from library values in one place.

A `Reply` is what a message (or a command) produced. It round-trips through JSON so an
idempotent retry returns the stored bytes' meaning exactly, without running the turn
again. Usage and history views are built from the store's events (`show_session`), the
record of what happened in every process, not from one process's cached agent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stoker.agent.loop import TurnResult
from stoker.cache.pricing import total_cost
from stoker.session_views import SessionView
from stoker.wire.record import CacheRecord
from stoker.wire.stored import SessionSummary
from stoker.wire.usage import Usage


def record_view(record: CacheRecord, *, turn: int | None = None) -> dict[str, Any]:
    """One provider call: its buckets, its cost, and why it read what it read."""
    u = record.usage
    return {
        "seq": record.seq,
        "turn": turn,
        "role": record.role,
        "purpose": record.purpose,
        "model": record.model,
        "started_at": record.started_at,
        "usage": {**u.to_dict(), "written": u.written, "input_total": u.input_total},
        "cost_usd": record.cost_usd,
        "declared_break": record.declared_break,
        "explanation": {
            "verdict": record.explanation.verdict,
            "text": str(record.explanation),
            "slot": record.explanation.slot,
        },
    }


def usage_dict(usage: Usage) -> dict[str, int]:
    return {**usage.to_dict(), "written": usage.written, "input_total": usage.input_total}


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What one message produced: a turn's answer, or a command's outcome."""

    session_id: str
    kind: str  # "answer" | "command"
    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    exit: str | None = None  # a turn's exit: "answered" | "budget_exhausted"
    requests: tuple[dict[str, Any], ...] = ()
    command: str | None = None
    new_session_id: str | None = None  # /new, /reset and /clear continue in another session
    data: dict[str, Any] | None = None
    replayed: bool = False  # answered from the idempotency store, not run again
    notice: str = ""  # e.g. the previous message got no answer (its turn was cut off)

    @classmethod
    def of_turn(cls, session_id: str, result: TurnResult) -> Reply:
        return cls(
            session_id=session_id,
            kind="answer",
            text=result.text,
            usage=result.usage,
            cost_usd=result.cost_usd,
            exit=result.exit,
            requests=tuple(record_view(r) for r in result.records),
            notice=result.notice,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "kind": self.kind,
            "text": self.text,
            "exit": self.exit,
            "usage": usage_dict(self.usage),
            "cost_usd": self.cost_usd,
            "requests": list(self.requests),
            "command": self.command,
            "new_session_id": self.new_session_id,
            "data": self.data,
            "replayed": self.replayed,
            "notice": self.notice,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, replayed: bool = False) -> Reply:
        return cls(
            session_id=d["session_id"],
            kind=d["kind"],
            text=d["text"],
            usage=Usage.from_dict(d["usage"]),
            cost_usd=d["cost_usd"],
            exit=d["exit"],
            requests=tuple(d["requests"]),
            command=d["command"],
            new_session_id=d["new_session_id"],
            data=d["data"],
            replayed=replayed,
            notice=d.get("notice", ""),
        )

    @classmethod
    def from_json(cls, raw: str, *, replayed: bool = False) -> Reply:
        return cls.from_dict(json.loads(raw), replayed=replayed)


def summary_view(s: SessionSummary) -> dict[str, Any]:
    return {
        "id": s.id,
        "model": s.model,
        "title": s.title,
        "messages": s.message_count,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


def usage_view(view: SessionView) -> dict[str, Any]:
    """Totals and every provider call of a session, in order, with its explanation."""
    requests = [
        record_view(r, turn=t.number) for t in view.turns for r in (*t.records, *t.keep_warm)
    ]
    return {
        "session_id": view.id,
        "model": requests[-1]["model"] if requests else view.model,  # after any /model
        "usage": usage_dict(view.usage),
        "cost_usd": total_cost(r["cost_usd"] for r in requests),
        "keep_warm": {
            "requests": len(view.keep_warm),
            "usage": usage_dict(Usage.total(r.usage for r in view.keep_warm)),
            "cost_usd": total_cost(r.cost_usd for r in view.keep_warm),
        },
        "requests": requests,
        "rebases": list(view.rebases),
    }


def history_view(view: SessionView) -> dict[str, Any]:
    return {
        "id": view.id,
        "model": view.model,
        "turns": [
            {
                "number": t.number,
                "user": t.user,
                "answer": t.answer,
                "tools": t.tools,
                "usage": usage_dict(t.usage),
                "cost_usd": t.cost_usd,
            }
            for t in view.turns
        ],
        "rebases": list(view.rebases),
    }


def event_view(seq: int, type_: str, created_at: float, body: str) -> dict[str, Any]:
    """One stored event as a client may see it: a message as stored, a provider call as
    `record_view` shows it; for the others (the session's creation, its prefix and
    configuration, which hold the operator's system prompt) only what and when."""
    data: dict[str, Any] | None = None
    if type_ == "message_appended":
        data = json.loads(body)
    elif type_ == "cache_recorded":
        data = record_view(CacheRecord.from_dict(json.loads(body)))
    return {"seq": seq, "type": type_, "created_at": created_at, "data": data}
