"""OpenAI's `prompt_cache_key`: addressed by what sessions share, sharded by traffic.

OpenAI keeps a key's cache apart from every other key's, and on earlier models routes
by the key (docs/provider-caching.md, "OpenAI routing and prompt_cache_key"). A key per
session (or per run) therefore starts every fresh session of one agent cold. Stoker's key
is a digest of what the sessions of an agent share - tools, system prompt, cache-keying
parameters, never the history or a time - plus the lineage's *slot*: a scope (empty, or a
user's digest where users must not share cache routing) and a shard.

The shard keeps each key under the rate above which an earlier model's requests overflow
to cold machines: a new lineage joins the least busy of as many shards as the traffic
observed for that shared prefix needs, and keeps it for life (it is stored in the
prefix's params, so forks, sub-agents and resumes send the same key and a conversation
never moves). Models that route by themselves (regime N) get one shard: there a second
key only splits the cache. The traffic is this process's own, or the whole fleet's when
replicas share their notes (`share`, `absorb`; see `stoker.cache.fleet_notes`).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections import Counter, deque

from stoker.cache.fleet_notes import FleetNote, Outbox
from stoker.wire.canonical import canonical_json
from stoker.wire.prefix import Prefix

WINDOW = 60.0  # request rates are per minute
OVERFLOW_PER_MINUTE = 15.0  # OpenAI: "about 15 requests per minute" per prefix and key


def lineage_cache_key(root_session_id: str) -> str:
    """The key of a session stored before keys were content-addressed (its prefix has no
    slot): kept, so such a session's cache stays warm after an upgrade."""
    return "stoker-" + hashlib.sha256(root_session_id.encode("utf-8")).hexdigest()[:32]


def shared_digest(prefix: Prefix) -> str:
    """What the sessions of one agent share: tools, system and params, without the slot."""
    memo = prefix.wire_memo
    digest = memo.get("shared_digest")
    if digest is None:
        params = {k: v for k, v in prefix.params.to_dict().items() if k != "cache_slot"}
        parts = [canonical_json(params), *prefix.tools, prefix.system.encode("utf-8")]
        h = hashlib.sha256()
        for part in parts:
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        digest = memo["shared_digest"] = h.hexdigest()
    return str(digest)


def cache_key(prefix: Prefix, root_session_id: str) -> str:
    """The `prompt_cache_key` a request with `prefix` sends (at most 64 characters)."""
    slot = prefix.params.cache_slot
    if slot is None:
        return lineage_cache_key(root_session_id)
    shared = shared_digest(prefix)
    return "stoker-" + hashlib.sha256(f"{shared}/{slot}".encode()).hexdigest()[:40]


def user_scope(user: str) -> str:
    """A scope that keeps one user's keys apart from everyone else's (a digest: the user
    id itself is never sent)."""
    return "u" + hashlib.sha256(user.encode("utf-8")).hexdigest()[:12]


class _Traffic:
    """Requests of one shared prefix in one scope over the trailing minute, per shard."""

    __slots__ = ("per_shard", "times")

    def __init__(self) -> None:
        self.times: deque[tuple[float, int]] = deque()
        self.per_shard: Counter[int] = Counter()

    def trim(self, at: float) -> None:
        times = self.times
        while times and times[0][0] <= at - WINDOW:
            _, shard = times.popleft()
            self.per_shard[shard] -= 1

    def add(self, at: float, shard: int) -> None:
        """Count one request; another process's may arrive late, so keep time order."""
        if not self.times or at >= self.times[-1][0]:
            self.times.append((at, shard))
        else:
            bisect.insort(self.times, (at, shard))
        self.per_shard[shard] += 1


def _split(slot: str) -> tuple[str, int]:
    scope, _, shard = slot.rpartition("/")
    return scope, int(shard) if shard.isdigit() else 0


class KeyShards:
    """Request rates per shared prefix and scope, as this process sees them (with the
    other replicas' notes it absorbs), and the shard a new lineage takes: the least busy
    of as many as the rate needs, so each key stays under `per_key_per_minute`. Not
    thread-safe (one event loop)."""

    __slots__ = ("_max", "_next_purge", "_outbox", "_per_key", "_traffic")

    def __init__(self, *, per_key_per_minute: float = 14.0, max_shards: int = 64) -> None:
        if not 0 < per_key_per_minute <= OVERFLOW_PER_MINUTE:
            raise ValueError(
                f"per_key_per_minute must be in (0, {OVERFLOW_PER_MINUTE:g}], "
                f"not {per_key_per_minute}"
            )
        if max_shards < 1:
            raise ValueError(f"max_shards must be at least 1, not {max_shards}")
        self._per_key = per_key_per_minute
        self._max = max_shards
        self._traffic: dict[tuple[str, str], _Traffic] = {}
        self._next_purge = float("-inf")
        self._outbox: Outbox | None = None

    def share(self, outbox: Outbox) -> None:
        """Keep a note of every request from now on in `outbox`, for the other replicas."""
        self._outbox = outbox

    def observe(self, prefix: Prefix, at: float) -> None:
        """Count a request sent with `prefix` at `at` (on its slot's shard)."""
        slot = prefix.params.cache_slot
        if slot is None:
            return  # a per-lineage key: no shared traffic to balance
        scope, shard = _split(slot)
        digest = shared_digest(prefix)
        self._count(digest, scope, shard, at)
        if self._outbox is not None:
            self._outbox.add(
                FleetNote(kind="request", digest=digest, at=at, scope=scope, shard=shard)
            )

    def absorb(self, note: FleetNote) -> None:
        """Count a request another replica sent (a "request" note; others are ignored)."""
        if note.kind == "request":
            self._count(note.digest, note.scope, note.shard, note.at)

    def _count(self, digest: str, scope: str, shard: int, at: float) -> None:
        self._purge(at)
        traffic = self._traffic.setdefault((digest, scope), _Traffic())
        traffic.trim(at)
        traffic.add(at, shard)

    def rate(self, prefix: Prefix, at: float, scope: str = "") -> int:
        """Requests sent with this shared prefix in `scope`, any shard, in the minute
        before `at`."""
        traffic = self._traffic.get((shared_digest(prefix), scope))
        if traffic is None:
            return 0
        traffic.trim(at)
        return len(traffic.times)

    def shards(self, prefix: Prefix, at: float, scope: str = "") -> int:
        """How many keys the observed rate needs to stay under the per-key rate."""
        needed = math.ceil(self.rate(prefix, at, scope) / self._per_key)
        return max(1, min(self._max, needed))

    def slot(self, prefix: Prefix, at: float, *, routed: bool, scope: str = "") -> str:
        """The slot of a new lineage: its scope and a shard, kept for its whole life.
        `routed`: the model routes by key (regime L), so more than one shard can help;
        then the lineage joins the least busy shard (the lowest, on a tie)."""
        shard = 0
        if routed:
            count = self.shards(prefix, at, scope)
            traffic = self._traffic.get((shared_digest(prefix), scope))
            load = traffic.per_shard if traffic is not None else Counter[int]()
            shard = min(range(count), key=lambda i: (load[i], i))
        return f"{scope}/{shard}" if scope else str(shard)

    def snapshot(self, at: float) -> dict[tuple[str, str], tuple[list[float], dict[int, int]]]:
        """Each (shared digest, scope)'s request times and per-shard counts in the minute
        before `at`: what two replicas that absorbed each other's notes should agree on."""
        view = {}
        for key, traffic in self._traffic.items():
            traffic.trim(at)
            counts = {shard: n for shard, n in traffic.per_shard.items() if n}
            view[key] = (sorted(t for t, _ in traffic.times), counts)
        return view

    def clear(self) -> None:
        """Forget every rate (a test's fresh start; a process normally never needs it)."""
        self._traffic.clear()
        self._next_purge = float("-inf")

    def _purge(self, at: float) -> None:
        if at < self._next_purge:
            return
        self._next_purge = at + WINDOW
        idle = [k for k, t in self._traffic.items() if not t.times or t.times[-1][0] <= at - WINDOW]
        for key in idle:
            del self._traffic[key]


_PROCESS = KeyShards()


def process_key_shards() -> KeyShards:
    """The rates this process observes, shared by every agent that does not bring its own."""
    return _PROCESS
