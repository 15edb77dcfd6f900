"""The numbers both charts draw, taken once from the calls so the HTML and the PNG agree.

Token buckets are stacked bottom to top in the order a reader asks about them: what was
read from the cache, what was written (5-minute, then 1-hour), what was sent uncached.
Cumulative costs skip calls nobody prices (the known total keeps growing; it never
turns into "unknown").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from stoker.report.build import Call

BUCKETS = (
    ("read", "read from cache", "#2e7d32"),
    ("written_5m", "written 5m", "#f9a825"),
    ("written_1h", "written 1h", "#ef6c00"),
    ("uncached", "uncached", "#9e9e9e"),
)
COST_COLOR, NO_CACHE_COLOR, MISS_COLOR = "#1565c0", "#b71c1c", "#d50000"


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    numbers: tuple[int, ...]  # x: 1.. in the order given (trees one after another)
    labels: tuple[str, ...]  # hover text: which session, when, why
    tokens: dict[str, tuple[int, ...]]  # bucket -> per call
    cumulative_cost: tuple[float, ...]
    cumulative_no_cache: tuple[float, ...]
    misses: tuple[int, ...]  # call numbers
    miss_heights: tuple[int, ...]  # the stack's top at each miss


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _running(values: Sequence[float | None]) -> tuple[float, ...]:
    total, out = 0.0, []
    for v in values:
        total += v or 0.0
        out.append(total)
    return tuple(out)


def series(calls: Sequence[Call]) -> Series:
    tokens = {key: tuple(getattr(c.usage, key) for c in calls) for key, _, _ in BUCKETS}
    misses = [(n, c) for n, c in enumerate(calls, 1) if c.is_miss]
    return Series(
        numbers=tuple(range(1, len(calls) + 1)),
        labels=tuple(
            f"call {c.number} · {c.role} {c.session_id[:8]} · {c.record.purpose} · "
            f"{_when(c.record.started_at)} · {c.record.explanation.verdict}"
            for c in calls
        ),
        tokens=tokens,
        cumulative_cost=_running([c.cost_usd for c in calls]),
        cumulative_no_cache=_running([c.no_cache_usd for c in calls]),
        misses=tuple(n for n, _ in misses),
        miss_heights=tuple(c.usage.input_total for _, c in misses),
    )
