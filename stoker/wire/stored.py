"""A session as a store gives it back, and the protocol of a store the agent can use.

The agent resumes from a `StoredSession` through `SessionSource`; it never imports the
store package, which implements this protocol (layers point down).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from stoker.wire.events import Event
from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSession:
    """Everything resume needs, read without scanning the event log for tools."""

    id: str
    role: str
    parent_id: str | None
    created_at: float
    prefix: Prefix  # the current one: after every declared rebase
    config: dict[str, Any]
    messages: tuple[Message, ...]
    used_tools: frozenset[str]
    last_record: CacheRecord | None = None
    declared_break: str | None = None  # declared, not yet carried by a call
    writes: dict[str, tuple[int, int]] = field(default_factory=dict)  # prefix key -> last write
    written_at: dict[str, float] = field(default_factory=dict)  # prefix key -> when it wrote
    holds: dict[str, tuple[int, int]] = field(default_factory=dict)  # prefix key -> 1h write
    gaps: tuple[float, ...] = ()  # the idle gaps between its turns, oldest first
    last_turn_at: float | None = None  # when its last turn's last call began
    root_id: str = ""
    epoch: int = 0  # compactions the session made (its history is the newest one's)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """One line of `stoker sessions list`."""

    id: str
    role: str
    parent_id: str | None
    created_at: float
    updated_at: float
    model: str
    message_count: int
    title: str


class SessionSource(Protocol):
    """A store, as the agent sees it: it takes events and gives sessions back."""

    async def emit(self, event: Event) -> None: ...

    async def load(self, session_id: str) -> StoredSession: ...
