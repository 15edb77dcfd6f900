"""Events to JSON rows and back. Exact bytes survive: the prefix is stored as its exact
JSON text, message text and tool-call arguments as JSON strings (which round-trip)."""

from __future__ import annotations

import json
from typing import Any

from stoker.errors import WireError
from stoker.wire.events import (
    ApprovalDecided,
    CacheRecorded,
    ConfigChanged,
    Event,
    HistoryCompacted,
    MessageAppended,
    PrefixRebased,
    SessionCreated,
)
from stoker.wire.messages import message_from_dict, message_to_dict
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord

_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once


def dumps(value: Any) -> str:
    return _COMPACT.encode(value)


def encode(event: Event) -> str:
    """The JSON body stored for `event` (its type is stored in its own column)."""
    if isinstance(event, SessionCreated):
        body: dict[str, Any] = {
            "prefix": event.prefix.to_json().decode("utf-8"),
            "config": event.config,
            "parent_id": event.parent_id,
            "role": event.role,
            "created_at": event.created_at,
        }
    elif isinstance(event, MessageAppended):
        body = {"index": event.index, "message": message_to_dict(event.message)}
    elif isinstance(event, CacheRecorded):
        body = event.record.to_dict()
    elif isinstance(event, PrefixRebased):
        body = {
            "prefix": event.prefix.to_json().decode("utf-8"),
            "reason": event.reason,
            "estimated_rewrite_tokens": event.estimated_rewrite_tokens,
            "estimated_cost_usd": event.estimated_cost_usd,
        }
    elif isinstance(event, ConfigChanged):
        body = {"changes": event.changes}
    elif isinstance(event, HistoryCompacted):
        body = {
            "messages": [message_to_dict(m) for m in event.messages],
            "replaced": event.replaced,
            "kept_from": event.kept_from,
            "reason": event.reason,
            "summarised_by": event.summarised_by,
            "estimated_rewrite_tokens": event.estimated_rewrite_tokens,
            "estimated_cost_usd": event.estimated_cost_usd,
        }
    elif isinstance(event, ApprovalDecided):
        body = {
            "tool": event.tool,
            "tool_use_id": event.tool_use_id,
            "summary": event.summary,
            "approved": event.approved,
            "by": event.by,
            "reason": event.reason,
            "at": event.at,
        }
    else:
        raise WireError(f"cannot store event {event!r}")
    return dumps(body)


def decode(session_id: str, type_: str, body: str) -> Event:
    data = json.loads(body)
    if type_ == "session_created":
        return SessionCreated(
            session_id=session_id,
            prefix=Prefix.from_json(data["prefix"]),
            config=data["config"],
            parent_id=data["parent_id"],
            role=data["role"] if "role" in data else data["kind"],  # "kind" before 4
            created_at=data["created_at"],
        )
    if type_ == "message_appended":
        return MessageAppended(
            session_id=session_id, index=data["index"], message=message_from_dict(data["message"])
        )
    if type_ == "cache_recorded":
        return CacheRecorded(session_id=session_id, record=CacheRecord.from_dict(data))
    if type_ == "prefix_rebased":
        return PrefixRebased(
            session_id=session_id,
            prefix=Prefix.from_json(data["prefix"]),
            reason=data["reason"],
            estimated_rewrite_tokens=data.get("estimated_rewrite_tokens", 0),
            estimated_cost_usd=data.get("estimated_cost_usd"),
        )
    if type_ == "config_changed":
        return ConfigChanged(session_id=session_id, changes=data["changes"])
    if type_ == "history_compacted":
        return HistoryCompacted(
            session_id=session_id,
            messages=tuple(message_from_dict(m) for m in data["messages"]),
            replaced=data["replaced"],
            kept_from=data["kept_from"],
            reason=data["reason"],
            summarised_by=data.get("summarised_by", ""),
            estimated_rewrite_tokens=data.get("estimated_rewrite_tokens", 0),
            estimated_cost_usd=data.get("estimated_cost_usd"),
        )
    if type_ == "approval_decided":
        return ApprovalDecided(
            session_id=session_id,
            tool=data["tool"],
            tool_use_id=data["tool_use_id"],
            summary=data["summary"],
            approved=data["approved"],
            by=data["by"],
            reason=data.get("reason", ""),
            at=data.get("at", 0.0),
        )
    raise WireError(
        f"unknown stored event type {type_!r}; this store was written by a newer Stoker"
    )
