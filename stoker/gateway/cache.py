"""One live agent per session, bounded by an LRU size and an idle TTL.

A fresh agent per message would re-derive the prefix every turn; one cached `Session`
per session id keeps sending the frozen one. Entries in use (mid-turn) are never
evicted by the bounds, so the cache may briefly hold more than its size under load.
Explicit evictions (commands, a changed signature, another writer) happen under the
session's lock, when no turn of that session is running.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stoker.config import DEFAULT_LIMITS
from stoker.gateway.session_settings import SessionSettings

if TYPE_CHECKING:
    from stoker.agent.agent import Agent
    from stoker.agent.session import Session
    from stoker.gateway.sink import SessionSink

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True, eq=False)
class CachedAgent:
    """A live session and what it was built from (bookkeeping, so mutable)."""

    session: Session
    agent: Agent  # what the session continues with (its last `adopt`)
    sink: SessionSink  # counts this process's own writes for the cross-process check
    user: str
    signature: str
    settings: SessionSettings  # what the live prefix reflects
    overrides: dict[str, Any] = field(default_factory=dict)
    last_used: float = 0.0
    busy: int = 0
    # What the signature was last found current with (the pool's defaults, these
    # overrides, the user, key and registry generation) and the settings they gave: the
    # signature is computed again only when one of them changes, not on every message.
    checked: tuple[tuple[object, ...], SessionSettings] | None = None


class AgentCache:
    """LRU + idle TTL over `CachedAgent`s; `busy` entries are never evicted by the bounds."""

    def __init__(
        self,
        *,
        max_size: int = DEFAULT_LIMITS.cache_size,
        idle_ttl: float = DEFAULT_LIMITS.idle_ttl,
        now: Callable[[], float] = time.monotonic,
        on_evict: Callable[[str], object] | None = None,
    ) -> None:
        self.max_size = max_size
        self.idle_ttl = idle_ttl
        self._now = now
        self._on_evict = on_evict
        self._entries: OrderedDict[str, CachedAgent] = OrderedDict()
        self.evictions: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._entries

    def peek(self, session_id: str) -> CachedAgent | None:
        """The entry, without touching its recency."""
        return self._entries.get(session_id)

    def acquire(self, session_id: str) -> CachedAgent | None:
        """The entry, marked in use and most recent; release it with `release`."""
        self.sweep()
        entry = self._entries.get(session_id)
        if entry is not None:
            self._entries.move_to_end(session_id)
            entry.busy += 1
        return entry

    def put(self, session_id: str, entry: CachedAgent, *, busy: bool = False) -> None:
        entry.last_used = self._now()
        if busy:
            entry.busy += 1
        self._entries[session_id] = entry
        self._entries.move_to_end(session_id)
        self._trim()

    def release(self, entry: CachedAgent) -> None:
        entry.busy = max(0, entry.busy - 1)
        entry.last_used = self._now()
        sid = entry.session.id
        if self._entries.get(sid) is entry:  # keep the order of last use for `sweep`
            self._entries.move_to_end(sid)
        self._trim()  # entries that were busy at the last put may be evictable now

    def evict(self, session_id: str, reason: str) -> CachedAgent | None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self.evictions[reason] += 1
            log.debug("evicted session %s: %s", session_id, reason)
            if self._on_evict is not None:
                self._on_evict(session_id)
        return entry

    def sweep(self) -> None:
        """Drop entries idle for longer than the TTL (entries in use are kept).

        Entries are kept in order of last use, so the walk stops at the first one that
        is still fresh: a sweep costs what it evicts, not the size of the cache.
        """
        cutoff = self._now() - self.idle_ttl
        for sid, entry in list(self._entries.items()):
            if entry.busy:
                continue
            if entry.last_used >= cutoff:
                return
            self.evict(sid, "idle")

    def _trim(self) -> None:
        while len(self._entries) > self.max_size:
            victim = next((sid for sid, e in self._entries.items() if not e.busy), None)
            if victim is None:
                return  # every entry is mid-turn: over the bound until one finishes
            self.evict(victim, "lru")
