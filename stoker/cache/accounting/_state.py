"""Cache entries of one isolation scope (an Anthropic workspace, an OpenAI organisation).

Expired entries are kept for a while (`forget_after`) and evictions are remembered, not
because a provider would, but so a miss can be explained as "expired 40 s ago" or
"evicted" instead of "nothing there".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from stoker.cache.accounting.outcome import MissFact
from stoker.wire.dialects._chain import ChainMemo


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheEntry:
    """One written prefix: how many tokens it covers and when it can be read."""

    tokens: int
    ttl: str
    expires_at: float
    available_at: float
    created_at: float
    last_used: float

    def live(self, at: float) -> bool:
        """Readable by a request that starts at `at`."""
        return self.expires_at > at and self.available_at <= at


class EntryStore:
    """Entries in least-recently-used order (a dict keeps insertion order; use re-inserts).

    `renders` keeps what rendering this scope's requests computed, so the next request,
    which mostly repeats the last one, renders only what is new (memory only).
    """

    __slots__ = (
        "_changes",
        "_entries",
        "_evicted",
        "_forget_after",
        "_max_entries",
        "_next_purge",
        "renders",
    )

    def __init__(self, *, max_entries: int | None, forget_after: float, memo_capacity: int) -> None:
        self.renders = ChainMemo(memo_capacity)
        self._entries: dict[str, CacheEntry] = {}
        # Keys changed since `changes()` was last called, with the entry each one dropped
        # last (None: none); only once asked for (`stoker.providers.sim.cache_file`).
        self._changes: dict[str, CacheEntry | None] | None = None
        self._evicted: dict[str, float] = {}
        self._max_entries = max_entries
        self._forget_after = forget_after
        self._next_purge = float("-inf")

    def get(self, key: str) -> CacheEntry | None:
        return self._entries.get(key)

    def readable(self, key: str, at: float) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.live(at)

    def miss(
        self,
        key: str,
        at: float,
        *,
        tokens: int,
        index: int | None = None,
        ttl: Callable[[CacheEntry], str] | None = None,
    ) -> MissFact | None:
        """Why the entry at `key` cannot be read at `at` (evicted, expired, not yet
        written); None when it can, or when nothing was ever there. `ttl` labels an
        expired entry's TTL (default: the TTL it was written with)."""
        entry = self._entries.get(key)
        if entry is None:
            return (
                MissFact(cause="evicted", index=index, tokens=tokens)
                if key in self._evicted
                else None
            )
        if entry.expires_at <= at:
            return MissFact(
                cause="expired",
                index=index,
                tokens=tokens,
                ttl=entry.ttl if ttl is None else ttl(entry),
                expired_for=at - entry.expires_at,
                idle=at - entry.last_used,
            )
        if entry.available_at > at:
            wait = entry.available_at - at
            return MissFact(cause="concurrent", index=index, tokens=tokens, available_in=wait)
        return None

    def was_evicted(self, key: str) -> bool:
        return key in self._evicted

    def put(self, key: str, entry: CacheEntry, *, at: float) -> None:
        """Store `entry` as the most recently used; evict beyond capacity (LRU)."""
        self._entries.pop(key, None)
        self._entries[key] = entry
        if self._changes is not None:
            self._changes.setdefault(key, None)
        self._evicted.pop(key, None)
        limit = self._max_entries
        if limit is None or len(self._entries) <= limit:
            return
        for dead in [k for k, e in self._entries.items() if e.expires_at <= at]:
            self._drop(dead)
        while len(self._entries) > limit:
            victim = next(iter(self._entries))
            self._drop(victim)
            self._evicted[victim] = at
        while len(self._evicted) > limit:
            del self._evicted[next(iter(self._evicted))]

    def write(
        self, key: str, *, tokens: int, ttl: str, expires_at: float, available_at: float, at: float
    ) -> None:
        """Write an entry at `key`, or rewrite the live one there.

        A live entry keeps its creation time, its earliest availability and its latest
        expiry: a concurrent writer does not push back an entry that is about to appear.
        """
        old = self._entries.get(key)
        if old is not None and old.expires_at > at:
            entry = replace(
                old,
                ttl=ttl if expires_at >= old.expires_at else old.ttl,
                expires_at=max(old.expires_at, expires_at),
                available_at=min(old.available_at, available_at),
                last_used=at,
            )
        else:
            entry = CacheEntry(
                tokens=tokens,
                ttl=ttl,
                expires_at=expires_at,
                available_at=available_at,
                created_at=at,
                last_used=at,
            )
        self.put(key, entry, at=at)

    def touch(self, key: str, *, expires_at: float, at: float) -> None:
        """A read of `key`: extend its expiry (never shorten it) and mark it used."""
        old = self._entries.get(key)
        if old is not None:
            expires = max(old.expires_at, expires_at)
            self.put(key, replace(old, expires_at=expires, last_used=at), at=at)

    def purge(self, at: float) -> None:
        """Forget entries long expired and old evictions; memory only, never billing."""
        if at < self._next_purge:
            return
        self._next_purge = at + min(self._forget_after, 60.0)
        horizon = at - self._forget_after
        for key in [k for k, e in self._entries.items() if e.expires_at <= horizon]:
            self._drop(key)
        for key in [k for k, when in self._evicted.items() if when <= horizon]:
            del self._evicted[key]

    def _drop(self, key: str) -> None:
        dropped = self._entries.pop(key)
        if self._changes is not None:
            self._changes[key] = dropped

    def snapshot(self) -> dict[str, CacheEntry]:
        return dict(self._entries)

    def changes(self) -> tuple[dict[str, CacheEntry], dict[str, CacheEntry]]:
        """(entries written or refreshed, entries dropped), by key, since the last call;
        the first call starts counting and returns nothing. Cheaper than comparing two
        snapshots of many entries when a call changes a few."""
        changed, self._changes = self._changes, {}
        if not changed:
            return {}, {}
        now: dict[str, CacheEntry] = {}
        gone: dict[str, CacheEntry] = {}
        for key, dropped in changed.items():
            entry = self._entries.get(key)
            if entry is not None:
                now[key] = entry
            elif dropped is not None:
                gone[key] = dropped
        return now, gone

    def __len__(self) -> int:
        return len(self._entries)


class StoreSettings(Protocol):
    """What an accountant's settings say of its entry stores."""

    @property
    def max_entries(self) -> int | None: ...

    @property
    def forget_after(self) -> float: ...

    @property
    def memo_capacity(self) -> int: ...


S = TypeVar("S", bound=StoreSettings)
SettingsT = TypeVar("SettingsT")
StateT = TypeVar("StateT")


class PerScope(Generic[SettingsT, StateT]):
    """An accountant's settings and its state per isolation scope (a workspace, an
    organisation), each scope's state made by `_open` on first use: scopes share nothing.

    `account(..., trusted=True)` means the caller never mutates the payload's dicts once
    passed (true of what the dialects render), so parts seen before may be recognized by
    identity.
    """

    __slots__ = ("_scopes", "_settings")

    def __init__(self, settings: SettingsT) -> None:
        self._settings = settings
        self._scopes: dict[str, StateT] = {}

    @property
    def settings(self) -> SettingsT:
        return self._settings

    def reset(self) -> None:
        """Forget every scope's state."""
        self._scopes.clear()

    def _scope(self, scope: str) -> StateT:
        state = self._scopes.get(scope)
        if state is None:
            state = self._scopes[scope] = self._open()
        return state

    def _open(self) -> StateT:
        raise NotImplementedError


class ScopedAccountant(PerScope[S, EntryStore]):
    """An accountant whose scopes each keep an `EntryStore`."""

    __slots__ = ()

    def entries(self, scope: str = "default") -> dict[str, CacheEntry]:
        """A copy of the scope's entries (key -> entry), least recently used first."""
        store = self._scopes.get(scope)
        return store.snapshot() if store else {}

    def entry_store(self, scope: str = "default") -> EntryStore:
        """The scope's entries themselves (made on first use), for a caller that keeps
        them elsewhere between processes (`stoker.providers.sim.cache_file`): it reads them
        with `snapshot` and puts back what it kept with `put`; the accounting is the same."""
        return self._scope(scope)

    def _open(self) -> EntryStore:
        s = self._settings
        return EntryStore(
            max_entries=s.max_entries, forget_after=s.forget_after, memo_capacity=s.memo_capacity
        )
