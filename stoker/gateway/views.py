"""The JSON the gateway answers with, built from library values in one place.

A `Reply` is what a message (or a command) produced. It round-trips through JSON so an
idempotent retry returns the stored bytes' meaning exactly, without running the turn
again. Usage and history views are built from the store's events (`show_session`), the
record of what happened in every process, not from one process's cached agent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from stoker.agent.cache_clock import cache_clock
from stoker.agent.loop import TurnResult
from stoker.cache.models import model_info
from stoker.cache.pricing import total_cost
from stoker.cache.time_policy import WarmPlan, lifetimes
from stoker.errors import ConfigError
from stoker.session_views import SessionView, Spend, usage_dict, view_dict
from stoker.session_views import record_dict as record_view
from stoker.wire.record import CacheRecord
from stoker.wire.request import Ttl
from stoker.wire.stored import SessionSummary
from stoker.wire.usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What one message produced: a turn's answer, or a command's outcome."""

    session_id: str
    kind: str  # "answer" | "command"
    text: str
    exit: str | None = None  # a turn's exit: "answered" | "budget_exhausted"
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    requests: tuple[dict[str, Any], ...] = ()
    command: str | None = None
    new_session_id: str | None = None  # /new, /reset and /clear continue in another session
    data: dict[str, Any] | None = None
    replayed: bool = False  # answered from the idempotency store, not run again
    notice: str = ""  # e.g. the previous message got no answer (its turn was cut off)

    @classmethod
    def of_turn(cls, session_id: str, result: TurnResult[Any]) -> Reply:
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
        """Every field, in order (the JSON a stored reply is replayed from)."""
        plain = {name: getattr(self, name) for name in _REPLY}
        return {**plain, "usage": usage_dict(self.usage), "requests": list(self.requests)}

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


_REPLY = tuple(f.name for f in fields(Reply))  # in order; `fields()` is slow to ask


def summary_view(s: SessionSummary) -> dict[str, Any]:
    return {
        "id": s.id,
        "model": s.model,
        "title": s.title,
        "messages": s.message_count,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


# How the dashboard colours a call: a miss (the cache should have served it and did not)
# apart from a declared break (a change someone made on purpose), and both apart from
# calls that could not read anything (the first, a prefix under the model's minimum).
_MISSES = frozenset(
    (
        "diverged",
        "expired",
        "lookback",
        "concurrent",
        "evicted",
        "cold",
        "overflow",
        "rerouted",
        "unexplained",
    )
)
_KINDS = {"hit": "hit", "declared": "declared", "first": "first", "kept_warm": "keep_warm"}


def request_kind(record: CacheRecord) -> str:
    """hit | miss | declared | first | keep_warm | uncacheable (below the minimum)."""
    verdict = record.explanation.verdict
    if verdict in _MISSES:
        return "miss"
    return _KINDS.get(verdict, "uncacheable")


def _lifetimes(record: CacheRecord) -> dict[Ttl, float]:
    """Seconds an entry of each TTL lives on the record's provider: the time policy's
    menu, or 5 minutes where it has none (as the session itself assumes)."""
    try:
        menu = lifetimes(model_info(record.model))
    except ConfigError:
        menu = None
    return {"5m": menu.short, "1h": menu.long} if menu else {"5m": 300.0, "1h": 300.0}


def _request(record: CacheRecord, turn: int) -> dict[str, Any]:
    live = _lifetimes(record)
    ttls = [live[b.ttl] for b in record.breakpoints]
    return {
        **record_view(record, turn=turn),
        "kind": request_kind(record),
        # the newest breakpoint's entry holds the most; it is the one whose expiry shows
        "ttl_seconds": ttls[-1] if ttls else 0,
        "longest_ttl_seconds": max(ttls, default=0),
    }


def clock_view(view: SessionView, plan: WarmPlan | None = None) -> dict[str, Any]:
    """The session's cache clock (`stoker.agent.cache_clock`) from its stored calls:
    `warm_until` (epoch seconds; None when nothing is cached), `next_cost_now` and
    `next_cost_cold` (USD of the next message's input, None without a price), the
    tokens cached, and `planned`: the time policy's `plan` with its price when the
    caller has the live session's (`Session.warm_plan`), else None."""
    records = view.records
    model = records[-1].model if records else view.model
    try:
        info = model_info(model)
    except ConfigError:  # a model no table knows: no lifetimes, no prices
        return {"warm_until": None, "next_cost_now": None, "next_cost_cold": None}
    return cache_clock(records, info, plan=plan).to_dict()


def usage_view(view: SessionView, plan: WarmPlan | None = None) -> dict[str, Any]:
    """Totals and every provider call of a session, in order, with its explanation, what
    caching saved in money (`spend`: priced calls only, the rest counted apart), and the
    cache clock (`clock_view`)."""
    records = [(t.number, r) for t in view.turns for r in (*t.records, *t.keep_warm)]
    requests = [_request(r, turn) for turn, r in records]
    return {
        "session_id": view.id,
        "title": view.turns[0].user if view.turns else "",
        "model": requests[-1]["model"] if requests else view.model,  # after any /model
        "usage": usage_dict(view.usage),
        "cost_usd": total_cost(r["cost_usd"] for r in requests),
        "spend": Spend.of(view.records).to_dict(),
        "keep_warm": {
            "requests": len(view.keep_warm),
            "usage": usage_dict(Usage.total(r.usage for r in view.keep_warm)),
            "cost_usd": total_cost(r.cost_usd for r in view.keep_warm),
        },
        "requests": requests,
        "rebases": list(view.rebases),
        **clock_view(view, plan),
    }


def totals_view(views: list[SessionView]) -> dict[str, Any]:
    """A user's sessions together: what they cost, what the cache saved, the hit ratio."""
    spend = sum((Spend.of(v.records) for v in views), Spend())
    return {"sessions": len(views), "spend": spend.to_dict()}


_TURN_FIELDS = ("number", "user", "answer", "tools", "usage", "cost_usd")


def history_view(view: SessionView, plan: WarmPlan | None = None) -> dict[str, Any]:
    """The conversation turn by turn, without each call's details (those are /usage's),
    and the cache clock (`clock_view`)."""
    whole = view_dict(view)
    return {
        "id": view.id,
        "model": view.model,
        "turns": [{k: t[k] for k in _TURN_FIELDS} for t in whole["turns"]],
        "rebases": whole["rebases"],
        **clock_view(view, plan),
    }


def event_view(seq: int, type_: str, created_at: float, body: str) -> dict[str, Any]:
    """One stored event as a client may see it: a message or an approval decision as
    stored, a provider call as `record_view` shows it; for the others (the session's
    creation, its prefix and configuration, which hold the operator's system prompt)
    only what and when."""
    data: dict[str, Any] | None = None
    if type_ in ("message_appended", "approval_decided"):
        data = json.loads(body)
    elif type_ == "cache_recorded":
        data = record_view(CacheRecord.from_dict(json.loads(body)))
    return {"seq": seq, "type": type_, "created_at": created_at, "data": data}
