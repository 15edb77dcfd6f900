"""Session events and the one-method sink the agent writes them to.

The agent emits; a store (or a test) implements `EventSink`. Because the agent only
knows this protocol, it never imports the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionCreated:
    session_id: str
    prefix: Prefix
    config: dict[str, Any] = field(default_factory=dict)  # never holds secrets
    parent_id: str | None = None
    role: str = "main"  # "main", "fork", "review", "subagent", "branch"
    created_at: float = 0.0
    type: Literal["session_created"] = "session_created"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageAppended:
    session_id: str
    index: int
    message: Message
    type: Literal["message_appended"] = "message_appended"


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheRecorded:
    session_id: str
    record: CacheRecord
    type: Literal["cache_recorded"] = "cache_recorded"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixRebased:
    """A declared cache break: the new prefix, why, and what the break is expected to cost."""

    session_id: str
    prefix: Prefix
    reason: str
    estimated_rewrite_tokens: int = 0
    estimated_cost_usd: float | None = None
    type: Literal["prefix_rebased"] = "prefix_rebased"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChanged:
    """A setting changed that does not move the prefix (callbacks and secrets never appear)."""

    session_id: str
    changes: dict[str, Any]
    type: Literal["config_changed"] = "config_changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryCompacted:
    """The history from here on is `messages`: a summary of what came before `kept_from`,
    then the newest messages verbatim. The messages it replaced stay in the log (a fork
    made before it still finds them), and the next call is a declared break."""

    session_id: str
    messages: tuple[Message, ...]
    replaced: int  # messages in the history it replaced
    kept_from: int  # the first of them kept verbatim
    reason: str
    summarised_by: str = ""  # the fork that wrote the summary
    estimated_rewrite_tokens: int = 0
    estimated_cost_usd: float | None = None
    type: Literal["history_compacted"] = "history_compacted"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A risky tool call was allowed or refused, and who decided ("user:alice",
    "timeout", "policy:background", "no approver"). The call's arguments are in the
    history, under `tool_use_id`; `summary` is the line the person was shown."""

    session_id: str
    tool: str
    tool_use_id: str
    summary: str
    approved: bool
    by: str
    reason: str = ""
    at: float = 0.0
    type: Literal["approval_decided"] = "approval_decided"


Event = (
    SessionCreated
    | MessageAppended
    | CacheRecorded
    | PrefixRebased
    | ConfigChanged
    | HistoryCompacted
    | ApprovalDecided
)


class EventSink(Protocol):
    """Receives every event of a session; an event is acknowledged when `emit` returns."""

    async def emit(self, event: Event) -> None: ...


@runtime_checkable
class BatchSink(Protocol):
    """A sink that also takes several events in one write: a turn's events then reach the
    store in one transaction at its durability points, not one per event. All of them
    are acknowledged when `emit_many` returns."""

    async def emit(self, event: Event) -> None: ...

    async def emit_many(self, events: Sequence[Event]) -> None: ...


class MemorySink:
    """Keeps events in a list: the default for sessions that need no durability."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    async def emit_many(self, events: Sequence[Event]) -> None:
        self.events.extend(events)
