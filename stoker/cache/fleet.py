"""The sessions that share a prefix, seen together: when new ones arrive, and who used
the shared part last.

Every session of an agent starts with the same tools and system prompt, and every call
of any of them refreshes the entry that covers that shared part. When the sessions go
quiet the entry expires, and the next new session writes it again at write prices. A
single session's time policy cannot see that: its own user may be gone while new users
of the same agent keep arriving. `FleetWatch` keeps what the time policy needs to keep
the shared part warm for them: the gaps between arrivals of new sessions (how likely one
is to come while the entry lives), when the entry was last used and by whom (one session
speaks for the fleet, so the shared part is kept warm once, not once per session), and
what keep-warm has spent on it since the last arrival (the cap of one rewrite per gap),
and, on a model with storage-priced caches (Gemini), the explicit cache of the shared part
one session made (`SharedCache`), which the fleet's new sessions read instead of each
making their own.

It counts what this process sees; replicas each see their own share unless they share
their notes (`share`, `absorb`; see `stoker.cache.fleet_notes`): then the arrivals, the
last use and the spend are the whole fleet's, and one session in the whole deployment
speaks for it.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

from stoker.cache.fleet_notes import FleetNote, Outbox
from stoker.cache.keys import shared_digest
from stoker.cache.tokens import count_tokens
from stoker.wire.prefix import Prefix

ARRIVALS_KEPT = 64  # the newest gaps say most about the rate now
ACCOUNT_SEP = "|"  # between a cache note's model and account, in its `scope`


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedCache:
    """An explicit cache of a fleet's tools and system prompt (Gemini's `cachedContents`):
    its name, model and size, the account it lives in (a digest: only sessions on the
    same API key see it), until when it lives, and when that was last noted."""

    name: str
    model: str
    account: str
    tokens: int
    expires_at: float
    noted_at: float


@dataclass(slots=True)
class Fleet:
    """One shared prefix: arrivals, the last use of its entry, and what keeping it cost."""

    arrivals: deque[float]
    last_use: float = float("-inf")  # start of the latest call that read or wrote it
    last_user: str = ""  # the session that made that call
    live_for: float = 300.0  # how long that call left the entry alive
    spent: float = 0.0  # keep-warm on the shared part since the last arrival (base input)
    cache: SharedCache | None = None  # the explicit cache of the shared part, if one lives

    def gaps(self) -> list[float]:
        """Seconds between consecutive arrivals of new sessions."""
        return [b - a for a, b in pairwise(self.arrivals)]

    @property
    def last_arrival(self) -> float:
        return self.arrivals[-1] if self.arrivals else float("-inf")


def shared_tokens(prefix: Prefix) -> int:
    """Tokens of the tools and the system prompt (an estimate, to price a decision)."""
    memo = prefix.wire_memo
    tokens = memo.get("shared_tokens")
    if tokens is None:
        text = [t.decode("utf-8") for t in prefix.tools]
        tokens = memo["shared_tokens"] = sum(map(count_tokens, [*text, prefix.system]))
    return int(tokens)


class FleetWatch:
    """Fleets by shared prefix, as this process sees them (with the other replicas'
    notes it absorbs). Not thread-safe (one loop)."""

    __slots__ = ("_fleets", "_max", "_outbox")

    def __init__(self, *, max_fleets: int = 1024) -> None:
        self._fleets: dict[str, Fleet] = {}
        self._max = max_fleets
        self._outbox: Outbox | None = None

    def share(self, outbox: Outbox) -> None:
        """Keep a note of every observation from now on in `outbox`, for the other replicas."""
        self._outbox = outbox

    def arrived(self, prefix: Prefix, at: float) -> None:
        """A new session (a new lineage) with `prefix` made its first call at `at`."""
        self._note(FleetNote(kind="arrival", digest=shared_digest(prefix), at=at))

    def used(self, prefix: Prefix, at: float, *, session_id: str, live_for: float) -> None:
        """A call of `session_id` starting at `at` read or wrote the shared entry, which
        then lives `live_for` seconds."""
        digest = shared_digest(prefix)
        self._note(
            FleetNote(kind="use", digest=digest, at=at, session=session_id, live_for=live_for)
        )

    def spend(self, prefix: Prefix, units: float) -> None:
        """Keep-warm spent `units` on the shared entry (after the fleet's latest use)."""
        digest = shared_digest(prefix)
        fleet = self._fleets.get(digest)
        at = fleet.last_use if fleet is not None else float("-inf")
        self._note(FleetNote(kind="spend", digest=digest, at=at, units=units))

    def cached(self, prefix: Prefix, cache: SharedCache) -> None:
        """An explicit cache of the shared part was made or extended (noted at
        `cache.noted_at`): it now lives until `cache.expires_at`."""
        at, name, tokens, expires_at = cache.noted_at, cache.name, cache.tokens, cache.expires_at
        self._note(
            FleetNote(
                kind="cache",
                digest=shared_digest(prefix),
                at=at,
                scope=f"{cache.model}{ACCOUNT_SEP}{cache.account}",
                session=name,
                units=float(tokens),
                live_for=max(expires_at - at, 0.0),
            )
        )

    def uncached(self, prefix: Prefix, *, name: str, at: float) -> None:
        """The explicit cache `name` of the shared part was deleted (or found gone)."""
        fleet = self.get(prefix)
        if fleet is None or fleet.cache is None or fleet.cache.name != name:
            return
        self._note(FleetNote(kind="cache", digest=shared_digest(prefix), at=at, session=name))

    def shared_cache(
        self, prefix: Prefix, *, account: str, now: float, margin: float
    ) -> SharedCache | None:
        """The live explicit cache of the shared part on this prefix's model in `account`,
        if one lives more than `margin` seconds yet."""
        fleet = self.get(prefix)
        found = fleet.cache if fleet is not None else None
        if found is None or found.model != prefix.params.model or found.account != account:
            return None
        return found if found.expires_at - now > margin else None

    def absorb(self, note: FleetNote) -> None:
        """Take in another replica's observation (a "request" note is not the fleet's)."""
        if note.kind == "arrival":
            fleet = self._fleet(note.digest)
            if not fleet.arrivals or note.at >= fleet.arrivals[-1]:
                fleet.arrivals.append(note.at)
                fleet.spent = 0.0  # a new gap between arrivals starts
            elif note.at > fleet.arrivals[0] or len(fleet.arrivals) < ARRIVALS_KEPT:
                ordered = list(fleet.arrivals)  # a late note from a replica that synced late
                bisect.insort(ordered, note.at)
                fleet.arrivals = deque(ordered[-ARRIVALS_KEPT:], maxlen=ARRIVALS_KEPT)
        elif note.kind == "use":
            fleet = self._fleet(note.digest)
            if note.at >= fleet.last_use:
                # A read refreshes the entry it hits for that entry's own lifetime: a
                # short marker reading a live long entry leaves it long.
                live = note.at < fleet.last_use + fleet.live_for
                kept = fleet.live_for if live else 0.0
                fleet.last_use, fleet.last_user = note.at, note.session
                fleet.live_for = max(note.live_for, kept)
        elif note.kind == "spend":
            fleet = self._fleet(note.digest)
            if note.at >= fleet.last_arrival:  # spend of an earlier gap is not this one's
                fleet.spent += note.units
        elif note.kind == "cache":
            self._cache_note(self._fleet(note.digest), note)

    @staticmethod
    def _cache_note(fleet: Fleet, note: FleetNote) -> None:
        """The newest note wins; a deletion ends only the cache it names."""
        held = fleet.cache
        if held is not None and note.at < held.noted_at:
            return  # older than what is known (a replica that synced late)
        if note.live_for <= 0:
            if held is not None and held.name == note.session:
                fleet.cache = None
            return
        model, _, account = note.scope.partition(ACCOUNT_SEP)
        fleet.cache = SharedCache(
            name=note.session,
            model=model,
            account=account,
            tokens=int(note.units),
            expires_at=note.at + note.live_for,
            noted_at=note.at,
        )

    def _note(self, note: FleetNote) -> None:
        self.absorb(note)
        if self._outbox is not None:
            self._outbox.add(note)

    def clear(self) -> None:
        """Forget every fleet (a test's fresh start; a process normally never needs it)."""
        self._fleets.clear()

    def get(self, prefix: Prefix) -> Fleet | None:
        return self._fleets.get(shared_digest(prefix))

    def by_digest(self, digest: str) -> Fleet | None:
        """The fleet of a shared prefix named by its digest (as notes name it)."""
        return self._fleets.get(digest)

    def _fleet(self, key: str) -> Fleet:
        fleet = self._fleets.get(key)
        if fleet is None:
            if len(self._fleets) >= self._max:  # forget the quietest
                oldest = min(self._fleets, key=lambda k: self._fleets[k].last_use)
                del self._fleets[oldest]
            fleet = self._fleets[key] = Fleet(arrivals=deque(maxlen=ARRIVALS_KEPT))
        return fleet


_PROCESS = FleetWatch()


def process_fleet() -> FleetWatch:
    """What this process sees of every fleet, shared by agents that bring no watch."""
    return _PROCESS
