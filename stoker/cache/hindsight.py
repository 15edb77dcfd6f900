"""A session's record against perfect foresight: its idle gaps as `foresight.Gap`s, what
was paid across each (keep-warm sent in it, plus what the call after it paid over reading
everything cached), and what the offline optimum would have paid.

The rest of the session (every call as if it read what was cached) costs the same
whatever was done across the gaps, so "with perfect foresight" is what was paid, less the
gaps' cost, plus the optimum's. A call whose miss is not the gap's doing (a declared
break, a moved byte) is charged to no gap: foresight would have paid it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from stoker.cache.foresight import Crossing, Gap, Tariff, optimum, tariff
from stoker.cache.models import ModelInfo, model_info
from stoker.cache.pricing import input_units
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage

_TIMED = frozenset({"hit", "expired", "kept_warm"})
"""Verdicts of a call after a gap whose cost the gap decided (a read, or a miss of time)."""


def record_units(record: CacheRecord, info: ModelInfo) -> float:
    """A call's input in base-input tokens, with the storage an explicit cache's lifecycle
    call bought at its price."""
    storage = 0.0
    if record.storage_token_hours and info.storage is not None and info.input:
        storage = record.storage_token_hours * info.storage / info.input
    return input_units(record.usage, info) + storage


def warm(usage: Usage, cached: int) -> Usage:
    """`usage` had the call read exactly the `cached` tokens its gap began with: what it
    wrote of them (5m first) or sent uncached becomes read; what it read past them (a tail
    a keep-warm wrote) becomes a short-TTL write, as the call would have made it."""
    cached = min(cached, usage.input_total)
    if usage.read > cached:
        extra = usage.read - cached
        return replace(usage, read=cached, written_5m=usage.written_5m + extra)
    missed = cached - usage.read
    from_5m = min(missed, usage.written_5m)
    from_1h = min(missed - from_5m, usage.written_1h)
    return replace(
        usage,
        uncached=usage.uncached - (missed - from_5m - from_1h),
        written_5m=usage.written_5m - from_5m,
        written_1h=usage.written_1h - from_1h,
        read=cached,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GapReview:
    """One gap: when it ended (the next call's session, seq and start), the gap, what was
    done (the keep-warm requests' purposes, and whether the return read the entry), what
    that cost, what foresight would have done, and what the decision expected."""

    session_id: str
    seq: int
    ended_at: float
    gap: Gap
    done: tuple[str, ...]
    kept: bool
    paid: float
    best: Crossing
    expected: str = ""  # what the time policy said it expected (its plan's reason)

    @property
    def differs(self) -> bool:
        """Foresight would have done otherwise, and paid less."""
        return self.paid > self.best.cost + 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Hindsight:
    """A session's input cost as paid and with perfect foresight (base-input tokens; USD
    where the model is priced), and each gap's review."""

    model: str
    paid: float
    foresight: float
    gaps: tuple[GapReview, ...]
    usd_per_unit: float | None

    @property
    def ratio(self) -> float:
        return self.paid / self.foresight if self.foresight > 0 else 1.0

    @property
    def paid_usd(self) -> float | None:
        return None if self.usd_per_unit is None else self.paid * self.usd_per_unit

    @property
    def foresight_usd(self) -> float | None:
        return None if self.usd_per_unit is None else self.foresight * self.usd_per_unit


def _long(record: CacheRecord) -> bool:
    return bool(record.breakpoints) and record.breakpoints[-1].ttl == "1h"


def reviews(records: Sequence[CacheRecord], menu: Tariff, info: ModelInfo) -> list[GapReview]:
    """Each gap between two turn calls of one session, in order (`records` one session's,
    in the order they were made: a frozen clock gives many the same start)."""
    out: list[GapReview] = []
    last: CacheRecord | None = None
    between: list[CacheRecord] = []
    for record in sorted(records, key=lambda r: r.started_at):
        if record.purpose != "turn":
            between.append(record)
            continue
        if last is not None and record.started_at > last.started_at:
            # What the entry held when the gap began: the last call's prefix, or more when
            # a fork after it wrote its answer too (the first keep-warm read it all; with
            # none, a return that read it all). The tail a keep-warm wrote is the answer as
            # it is resent; without one, the answer's output tokens stand for it.
            warmed = [r for r in between if r.purpose in ("ping", "seal")]
            seen = warmed[0].usage.read if warmed else 0
            if not warmed and record.explanation.verdict == "hit":
                seen = record.usage.read
            cached = max(last.usage.read + last.usage.written, seen)
            gap = Gap(
                seconds=record.started_at - last.started_at,
                cached=cached,
                tail=warmed[0].usage.written if warmed else last.usage.output,
                long_lived=_long(last),
                overhead=warmed[0].usage.uncached if warmed else 16,
            )
            spent = sum(record_units(r, info) for r in between)
            timed = record.explanation.verdict in _TIMED
            penalty = (
                record_units(record, info) - input_units(warm(record.usage, cached), info)
                if timed
                else 0.0
            )
            said = between[0].explanation.detail if between else ""
            if not between and record.explanation.verdict == "expired":
                said = record.explanation.detail
            out.append(
                GapReview(
                    session_id=record.session_id,
                    expected=said,
                    seq=record.seq,
                    ended_at=record.started_at,
                    gap=gap,
                    done=tuple(r.purpose for r in between),
                    kept=record.usage.read >= cached,
                    paid=spent + penalty,
                    best=optimum(gap, menu),
                )
            )
            between = []
        last = record
    return out


def hindsight(
    records: Iterable[CacheRecord], *, margin: float = 30.0, info: ModelInfo | None = None
) -> Hindsight | None:
    """`records` (one session's, or a run's: each session's gaps are its own) as paid
    and with perfect foresight; None when there are none. Prices are `info`'s, or the
    first call's model's; forks, reviews and sub-agents have no gaps of their own, only
    cost."""
    records = list(records)
    if not records:
        return None
    info = info or model_info(records[0].model)
    menu = tariff(info, margin=margin)
    paid = sum(record_units(r, info) for r in records)
    by_session: dict[str, list[CacheRecord]] = {}
    for r in records:
        if r.role in ("main", "branch"):
            by_session.setdefault(r.session_id, []).append(r)
    gaps = [g for rs in by_session.values() for g in reviews(rs, menu, info)]
    foresight = paid - sum(g.paid for g in gaps) + sum(g.best.cost for g in gaps)
    return Hindsight(
        model=info.name,
        paid=paid,
        foresight=foresight,
        gaps=tuple(gaps),
        usd_per_unit=info.input / 1_000_000 if info.input is not None else None,
    )
