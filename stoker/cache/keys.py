"""OpenAI's `prompt_cache_key`: addressed by what sessions share, sharded by traffic.

OpenAI keeps a key's cache apart from every other key's, and on earlier models routes
by the key (docs/provider-caching.md, "OpenAI routing and prompt_cache_key"). A key per
session (or per run) therefore starts every fresh session of one agent cold. Stoker's key
is a digest of what the sessions of an agent share - tools, system prompt, cache-keying
parameters, never the history or a time - plus the lineage's *slot*: a scope (empty, or a
user's digest where users must not share cache routing) and a shard.

The shard keeps each key under the rate above which an earlier model's requests overflow
to cold machines: a new lineage picks one of as many shards as the traffic this process
observes for that shared prefix needs, and keeps it for life (it is stored in the
prefix's params, so forks, sub-agents and resumes send the same key and a conversation
never moves). Models that route by themselves (regime N) get one shard: there a second
key only splits the cache.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque

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


class KeyShards:
    """Request rates per shared prefix, as this process sees them, and the shard a new
    lineage takes. Not thread-safe (one event loop)."""

    __slots__ = ("_max", "_next_purge", "_per_key", "_times")

    def __init__(self, *, per_key_per_minute: float = 12.0, max_shards: int = 64) -> None:
        if not 0 < per_key_per_minute <= OVERFLOW_PER_MINUTE:
            raise ValueError(
                f"per_key_per_minute must be in (0, {OVERFLOW_PER_MINUTE:g}], "
                f"not {per_key_per_minute}"
            )
        if max_shards < 1:
            raise ValueError(f"max_shards must be at least 1, not {max_shards}")
        self._per_key = per_key_per_minute
        self._max = max_shards
        self._times: dict[str, deque[float]] = {}
        self._next_purge = float("-inf")

    def observe(self, prefix: Prefix, at: float) -> None:
        """Count a request sent with `prefix` at `at`."""
        self._purge(at)
        times = self._times.setdefault(shared_digest(prefix), deque())
        while times and times[0] <= at - WINDOW:
            times.popleft()
        times.append(at)

    def rate(self, prefix: Prefix, at: float) -> int:
        """Requests sent with this shared prefix, any slot, in the minute before `at`."""
        times = self._times.get(shared_digest(prefix))
        if not times:
            return 0
        while times and times[0] <= at - WINDOW:
            times.popleft()
        return len(times)

    def shards(self, prefix: Prefix, at: float) -> int:
        """How many keys the observed rate needs to stay under the overflow rate."""
        return max(1, min(self._max, math.ceil(self.rate(prefix, at) / self._per_key)))

    def slot(
        self, prefix: Prefix, lineage: str, at: float, *, routed: bool, scope: str = ""
    ) -> str:
        """The slot of a new lineage: its scope and a shard, stable for its whole life.
        `routed`: the model routes by key (regime L), so more than one shard can help."""
        count = self.shards(prefix, at) if routed else 1
        digest = hashlib.sha256(lineage.encode("utf-8")).digest()
        shard = int.from_bytes(digest[:8], "big") % count
        return f"{scope}/{shard}" if scope else str(shard)

    def _purge(self, at: float) -> None:
        if at < self._next_purge:
            return
        self._next_purge = at + WINDOW
        for digest in [d for d, t in self._times.items() if not t or t[-1] <= at - WINDOW]:
            del self._times[digest]


_PROCESS = KeyShards()


def process_key_shards() -> KeyShards:
    """The rates this process observes, shared by every agent that does not bring its own."""
    return _PROCESS
