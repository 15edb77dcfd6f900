"""A report's "with perfect foresight": what the tree's calls would have cost had every
idle gap been crossed the cheapest way knowing when the user came back
(`stoker.cache.hindsight`), against what was paid, and each gap where the two differ:
what was done, what the decision expected, and what foresight would have chosen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.cache.hindsight import GapReview, Hindsight, hindsight
from stoker.cache.models import ModelInfo
from stoker.wire.figures import json_ratio, json_usd
from stoker.wire.record import CacheRecord


def _money(units: float, seen: Hindsight) -> str:
    usd = seen.usd_per_unit
    return f"{units:,.0f} base-input tokens" if usd is None else f"${units * usd:,.5f}"


def _line(g: GapReview, number: int | None, seen: Hindsight) -> str:
    done = ", ".join(g.done) if g.done else "nothing sent"
    outcome = "the return read the entry" if g.kept else "the entry expired"
    where = f"call {number}" if number is not None else f"{g.session_id} #{g.seq}"
    said = f"; it expected: {g.expected}" if g.expected else ""
    return (
        f"gap before {where} ({g.gap.seconds / 60:,.0f} min idle): {done}, {outcome}: "
        f"paid {_money(g.paid, seen)}; foresight: {g.best.summary}, "
        f"{_money(g.best.cost, seen)}{said}"
    )


def foresight_notes(
    calls: Sequence[tuple[int, CacheRecord]], info: ModelInfo | None
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The lines a lineage's report adds for its `calls` (each with its number in the
    report), and the same as data (empty where no idle gap cost anything either way)."""
    seen = hindsight([r for _, r in calls], info=info) if calls else None
    if seen is None or not any(g.paid or g.best.cost for g in seen.gaps):
        return (), {}
    number = {(r.session_id, r.seq, r.started_at): n for n, r in calls}
    differing = [g for g in seen.gaps if g.differs]
    lines = [
        f"with perfect foresight: {_money(seen.foresight, seen)}; paid: "
        f"{_money(seen.paid, seen)} (input, {seen.ratio:.3f}x; {len(seen.gaps)} idle "
        f"gap{'s' if len(seen.gaps) != 1 else ''}, {len(differing)} crossed otherwise "
        "than foresight would have)",
        *(_line(g, number.get((g.session_id, g.seq, g.ended_at)), seen) for g in differing),
    ]
    usd = seen.usd_per_unit
    data = {
        "paid_usd": json_usd(seen.paid_usd),
        "foresight_usd": json_usd(seen.foresight_usd),
        "ratio": json_ratio(seen.ratio),
        "gaps": [
            {
                "call": number.get((g.session_id, g.seq, g.ended_at)),
                "seconds": round(g.gap.seconds, 1),
                "done": list(g.done),
                "kept": g.kept,
                "paid_usd": json_usd(None if usd is None else g.paid * usd),
                "foresight": g.best.summary,
                "foresight_usd": json_usd(None if usd is None else g.best.cost * usd),
                "expected": g.expected,
            }
            for g in differing
        ],
    }
    return tuple(lines), data
