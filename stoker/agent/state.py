"""What a session remembers between calls, so the next call can be planned and explained."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.planner import BlockRef
from stoker.cache.robust import Account
from stoker.cache.storage import Stored
from stoker.wire.fingerprint import key_of
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request, Ttl, furthest_long


@dataclass(slots=True, kw_only=True)
class CacheState:
    """The previous request (for explanations), where it wrote (for the planner), the
    history hash chain and the render memo, and what the time policy needs: how long the
    newest entry lives, what it covers, the idle gaps seen. Owned by one session; forks
    get a copy."""

    last_request: Request | None = None
    last_started: float | None = None  # start of the last call, keep-warm included
    last_written: int | None = None
    last_input_tokens: int = 0
    last_cached: int = 0  # tokens the newest entry covers (read + written)
    live_ttl: Ttl | None = None  # the TTL of that entry, from `last_started`
    written: dict[str, BlockRef] = field(default_factory=dict)  # prefix key -> its last write
    written_at: dict[str, float] = field(default_factory=dict)  # prefix key -> when, last
    held: dict[str, BlockRef] = field(default_factory=dict)  # prefix key -> furthest 1h write
    own_write: BlockRef | None = None  # where this session's own last call wrote
    recorded_upto: int = 0
    chain: list[str] = field(default_factory=list)
    render_memo: dict[str, Any] = field(default_factory=dict)
    idle_since: float | None = None  # start of the last turn's last call
    gaps: list[float] = field(default_factory=list)  # idle gaps between turns, seconds
    seen: tuple[float, ...] = ()  # the gaps the store's other sessions showed, at open
    unrecorded_gap: float | None = None  # the newest gap, until a record carries it
    warm_spent: float = 0.0  # keep-warm spent in this gap, base-input tokens
    warm_spent_usd: float = 0.0  # keep-warm spent by the session in all
    warm_failed_at: float | None = None  # a keep-warm failed; none again until a call
    account: Account = field(default_factory=Account)  # its gaps against foresight so far
    explicit: Stored | None = None  # the explicit cache object the session holds (Gemini)

    def copy(self) -> CacheState:
        return replace(
            self,
            chain=list(self.chain),
            render_memo={
                k: (n, list(items), last) for k, (n, items, last) in self.render_memo.items()
            },
            gaps=list(self.gaps),
            written=dict(self.written),
            written_at=dict(self.written_at),
            held=dict(self.held),
            unrecorded_gap=None,  # the parent's to record, not the copy's
        )

    def last_write(self, prefix: Prefix) -> BlockRef | None:
        """Where the last call with this very prefix wrote (this session's, or a fork's
        anchor): its keys are this prefix's, so after a switch away and back (a model,
        thinking) the planner can reach it again."""
        return self.written.get(key_of(prefix))

    def gone(self, prefix: Prefix, now: float, lifetime: float) -> bool:
        """Whether the entry at `last_write(prefix)` has expired by `now`, if it lives
        `lifetime` seconds from the call that last wrote or read there."""
        at = self.written_at.get(key_of(prefix))
        return at is not None and now - at > lifetime

    def long_write(self, prefix: Prefix) -> BlockRef | None:
        """Where the furthest 1-hour entry on this prefix's history ends (a fork's anchor,
        a seal): the planner keeps it within reach after the short entries expire."""
        return self.held.get(key_of(prefix))

    def forked_at(
        self, prefix: Prefix, anchor: BlockRef | None, at: float, *, long: bool = True
    ) -> None:
        """A fork's first call writes an entry at `anchor`, the end of this history (a
        1-hour one unless not `long`, see `plan_anthropic`), about `at`."""
        key = key_of(prefix)
        current = self.written.get(key)
        if anchor is not None and (current is None or current < anchor):
            self.written[key] = anchor
            self.written_at[key] = at
        if long:
            self._hold(key, anchor)

    def after_call(self, request: Request, record: CacheRecord) -> None:
        """Remember a finished call: the next one is planned and explained against it."""
        self.last_request = request
        self.after_refresh(request, record)
        self.last_written = record.usage.written
        self.last_input_tokens = record.usage.input_total
        self.recorded_upto = len(request.messages)

    def after_refresh(self, request: Request, record: CacheRecord) -> None:
        """Remember what a call (a keep-warm too) left in the cache, and until when."""
        self.last_started = record.started_at
        self.last_cached = record.usage.read + record.usage.written
        last = request.breakpoints[-1].ttl if request.breakpoints else None
        self.live_ttl = last if self.last_cached else None
        self.warm_failed_at = None
        key = key_of(request.prefix)
        if request.breakpoints and (at := request.breakpoints[-1].message) is not None:
            self.own_write = (at, request.breakpoints[-1].block)
            self.written[key] = self.own_write
            self.written_at[key] = record.started_at
        if self.last_cached:
            self._hold(key, furthest_long(request.breakpoints))

    def _hold(self, key: str, ref: BlockRef | None) -> None:
        """Keep the furthest 1-hour entry on a prefix, as the store does (`hold_op`)."""
        if ref is not None and (key not in self.held or self.held[key] < ref):
            self.held[key] = ref

    def turn_starts(self, now: float) -> None:
        """A user turn begins: the gap since the last one is an observation, which the
        turn's first record carries to the store (`take_gap`) for a resumed session."""
        if self.idle_since is not None:
            self.gaps.append(now - self.idle_since)
            self.unrecorded_gap = self.gaps[-1]
        self.warm_spent = 0.0

    def take_gap(self) -> float | None:
        gap, self.unrecorded_gap = self.unrecorded_gap, None
        return gap

    def turn_ended(self) -> None:
        self.idle_since = self.last_started
