"""`stoker report-proxy`: what the recorded traffic did with the cache, per lineage.

For each lineage: the share of input read from the cache, what was written against the
ideal (every distinct prefix token written once), the input cost against sending the
same tokens with no cache, what optimize mode changed (the breakpoints it added), and
each miss with its cause and what it cost: the tokens the previous call of the lineage
had sent (so could have been cached) that this one paid full or write price for again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.proxy.recorder import info_of
from stoker.store.proxy_log import ProxyLog
from stoker.wire.exchange import Exchange, LineageSummary
from stoker.wire.record import CacheRecord

_READ_ALL = frozenset({"hit", "first", "kept_warm"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Miss:
    """A call that read less than it could: where, why, and the price of it."""

    seq: int
    verdict: str
    explanation: str
    lost_tokens: int
    cost_usd: float | None
    cost_units: float  # in base-input tokens, known for any model


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageReport:
    lineage: LineageSummary
    calls: int
    pings: int
    errors: int
    input_tokens: int
    read: int
    written: int
    ideal: int
    input_units: float  # input cost in base-input tokens, keep-warm included
    added_breakpoints: tuple[str, ...]
    rewrites: tuple[str, ...]  # every other rewrite optimize mode made
    cannot_fix: tuple[str, ...]
    misses: tuple[Miss, ...]

    @property
    def read_share(self) -> float:
        return self.read / self.input_tokens if self.input_tokens else 0.0

    @property
    def writes_vs_ideal(self) -> float | None:
        return self.written / self.ideal if self.ideal else None

    @property
    def cost_vs_no_cache(self) -> float:
        return self.input_units / self.input_tokens if self.input_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "lineage": self.lineage.id,
            "parent": self.lineage.parent_id,
            "title": self.lineage.title,
            "model": self.lineage.model,
            "calls": self.calls,
            "pings": self.pings,
            "errors": self.errors,
            "read_share": round(self.read_share, 4),
            "written": self.written,
            "ideal": self.ideal,
            "cost_vs_no_cache": round(self.cost_vs_no_cache, 4),
            "added_breakpoints": list(self.added_breakpoints),
            "rewrites": list(self.rewrites),
            "cannot_fix": list(self.cannot_fix),
            "misses": [
                {
                    "seq": m.seq,
                    "verdict": m.verdict,
                    "explanation": m.explanation,
                    "lost_tokens": m.lost_tokens,
                    "cost_usd": m.cost_usd,
                }
                for m in self.misses
            ],
        }


def input_units(record: CacheRecord) -> float:
    """A call's input cost in base-input tokens."""
    info = info_of(record.model, "anthropic" if record.provider == "anthropic" else "openai")
    u = record.usage
    return (
        u.uncached
        + info.write_5m * u.written_5m
        + info.write_1h * u.written_1h
        + info.read * u.read
    )


def miss_of(record: CacheRecord, previous: CacheRecord | None) -> Miss | None:
    """The miss in `record`, if any, against the lineage's previous turn call."""
    sent_before = previous.usage.input_total if previous is not None else 0
    lost = max(0, min(sent_before, record.usage.input_total) - record.usage.read)
    verdict = record.explanation.verdict
    if lost == 0 and verdict in _READ_ALL:
        return None
    if lost == 0 and verdict == "below_minimum" and previous is None:
        return None
    info = info_of(record.model, "anthropic" if record.provider == "anthropic" else "openai")
    written = min(lost, record.usage.written)
    units = written * (info.write_5m - info.read) + (lost - written) * (1.0 - info.read)
    return Miss(
        seq=record.seq,
        verdict=verdict,
        explanation=str(record.explanation),
        lost_tokens=lost,
        cost_usd=units * info.input / 1_000_000 if info.input is not None else None,
        cost_units=units,
    )


def lineage_report(summary: LineageSummary, calls: list[Exchange]) -> LineageReport:
    """The figures of one lineage from its recorded calls, in order."""
    records = [c.record for c in calls if c.record is not None]
    turns = [r for r in records if r.purpose == "turn"]
    misses: list[Miss] = []
    previous: CacheRecord | None = None
    for record in turns:
        miss = miss_of(record, previous)
        if miss is not None:
            misses.append(miss)
        previous = record
    rewrites = [r for c in calls for r in c.rewrites]
    return LineageReport(
        lineage=summary,
        calls=sum(1 for c in calls if c.purpose == "turn"),
        pings=sum(1 for c in calls if c.purpose != "turn"),
        errors=sum(1 for c in calls if c.error is not None and c.record is None),
        input_tokens=sum(r.usage.input_total for r in turns),
        read=sum(r.usage.read for r in turns),
        written=sum(r.usage.written for r in records),
        ideal=sum(c.ideal for c in calls),
        input_units=sum(input_units(r) for r in records),
        added_breakpoints=tuple(
            f"#{c.seq} {r.removeprefix('added breakpoint ')}"
            for c in calls
            for r in c.rewrites
            if r.startswith("added breakpoint ")
        ),
        rewrites=tuple(dict.fromkeys(r for r in rewrites if "breakpoint" not in r)),
        cannot_fix=tuple(f"#{c.seq} {n}" for c in calls for n in c.cannot_fix),
        misses=tuple(misses),
    )


async def proxy_report(store: ProxyLog, *, limit: int = 100) -> list[LineageReport]:
    """Every recorded lineage's figures, most recently used first."""
    return [
        lineage_report(summary, await store.proxy_calls(summary.id))
        for summary in await store.proxy_lineages(limit=limit)
    ]
