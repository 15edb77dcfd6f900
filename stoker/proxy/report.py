"""`stoker report-proxy`: what the recorded traffic did with the cache, as `stoker report`
tells it for Stoker's own sessions: totals in dollars, what the cache saved, and each
miss with its cause, its fix and what the fix would save.

Lineages are grouped into trees (a conversation and the forks made from it). Every
figure comes from the usage the provider reported:

- a miss is a call that read less than the longest earlier call it extends had sent
  (`Exchange.sent_before`), by that many tokens (on OpenAI's implicit regime, less a
  boundary: reads come in whole boundaries there);
- its cost is the call's cost over what it would have cost reading those tokens; for a
  request with no breakpoint, the fix is Stoker's breakpoints, which also write what
  the call adds (`stoker.report.counterfactual.with_breakpoints`);
- writes are weighed against the ideal, the input no earlier call of the tenant had sent
  (`Exchange.ideal`): 1.00x writes each token once.

What optimize mode changed (breakpoints placed, tools reordered) is summed up once per
tree, not listed per call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stoker.cache.models import ModelInfo
from stoker.cache.prices import PriceBook
from stoker.errors import UnknownPrice
from stoker.report.build import (
    FIXES,
    Call,
    LineageReport,
    Miss,
    Report,
    WhatIf,
    info_for,
    info_of_model,
    priced_call,
    usd,
)
from stoker.report.counterfactual import Step, read_with_fix, with_breakpoints
from stoker.report.lineage import SessionNode
from stoker.store.proxy_log import ProxyLog
from stoker.wire.exchange import Exchange, LineageSummary
from stoker.wire.figures import json_ratio

OPTIMIZE = "http_client(optimize=True) or stoker proxy --optimize"
_PARTIAL_FIX = "a breakpoint on the newest block each call (`stoker proxy --optimize` places one)"


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageFigures:
    """One lineage's own figures: calls, keep-warm requests, reads, writes and the ideal."""

    lineage: LineageSummary
    calls: int
    keep_warm: int
    errors: int
    input_tokens: int
    read: int
    written: int
    ideal: int
    free_writes: bool  # the model's writes cost nothing (OpenAI's implicit regime)

    @property
    def read_share(self) -> float:
        return self.read / self.input_tokens if self.input_tokens else 0.0

    @property
    def writes_vs_ideal(self) -> float | None:
        """Written over the ideal; None where writes are free or nothing was new."""
        if self.free_writes or not self.ideal:
            return None
        return self.written / self.ideal

    def to_dict(self) -> dict[str, Any]:
        ratio = self.writes_vs_ideal
        return {
            "lineage": self.lineage.id,
            "parent": self.lineage.parent_id,
            "title": self.lineage.title,
            "model": self.lineage.model,
            "dialect": self.lineage.dialect,
            "calls": self.calls,
            "keep_warm": self.keep_warm,
            "errors": self.errors,
            "read_share": json_ratio(self.read_share),
            "written": self.written,
            "ideal": self.ideal,
            "writes_vs_ideal": json_ratio(ratio),
        }

    def line(self) -> str:
        ratio = self.writes_vs_ideal
        vs = f"{ratio:.2f}x the ideal {self.ideal:,}" if ratio is not None else "writes are free"
        warm = f" + {self.keep_warm} keep-warm" if self.keep_warm else ""
        role = "fork" if self.lineage.parent_id else "conversation"
        return (
            f"{role} {self.lineage.id}: {self.calls} calls{warm} · read {self.read_share:.1%} · "
            f"wrote {self.written:,} ({vs})"
        )


def _figures(summary: LineageSummary, calls: Sequence[Exchange], info: ModelInfo) -> LineageFigures:
    records = [c.record for c in calls if c.record is not None]
    turns = [r for r in records if r.purpose == "turn"]
    return LineageFigures(
        lineage=summary,
        calls=sum(1 for c in calls if c.purpose == "turn"),
        keep_warm=sum(1 for c in calls if c.purpose != "turn"),
        errors=sum(1 for c in calls if c.error is not None and c.record is None),
        input_tokens=sum(r.usage.input_total for r in turns),
        read=sum(r.usage.read for r in turns),
        written=sum(r.usage.written for r in records),
        ideal=sum(c.ideal for c in calls),
        free_writes=info.provider == "openai" and info.regime != "N",
    )


def _slack(info: ModelInfo) -> int:
    """Tokens a full read may fall short of what was sent: a boundary and the framing on
    OpenAI's implicit regime, nothing where breakpoints say what is read."""
    return info.interval + 16 if info.regime == "L" else 0


def _changes(calls: Sequence[Exchange]) -> list[str]:
    """What optimize mode did to a tree's calls, summed up in a few lines."""
    placed: Counter[str] = Counter()
    removed = 0
    marked: set[tuple[str, int]] = set()
    rewrites: Counter[str] = Counter()
    for c in calls:
        for note in c.rewrites:
            if note.startswith("added breakpoint "):
                where = note.removeprefix("added breakpoint ")
                kind = "tools+system" if where.startswith("tools+system") else "a message block"
                placed[f"{kind} ({where.rsplit('(', 1)[-1]}"] += 1
                marked.add((c.lineage_id, c.seq))
            elif note.startswith("removed breakpoint "):
                removed += 1
            elif not note.startswith("set prompt_cache_key "):
                rewrites[note] += 1
            else:
                rewrites["set a prompt_cache_key per lineage"] += 1
    lines = []
    if placed:
        spots = ", ".join(f"{kind} ×{n}" for kind, n in placed.most_common())
        mine = f"; replaced {removed} of the client's own" if removed else ""
        lines.append(f"--optimize placed breakpoints in {len(marked)} calls: {spots}{mine}")
    lines += [f"--optimize {note} ({n} calls)" for note, n in rewrites.items()]
    cannot = [f"#{c.seq} {n}" for c in calls for n in c.cannot_fix]
    lines += [f"cannot fix {line}" for line in cannot[:3]]
    if len(cannot) > 3:
        lines.append(f"cannot fix {len(cannot) - 3} more calls the same way")
    return lines


def _trees(summaries: Sequence[LineageSummary]) -> list[list[LineageSummary]]:
    """Lineages grouped under their root (a parent not listed makes its child a root),
    parents first, trees in the order their first lineage was listed."""
    by_id = {s.id: s for s in summaries}

    def root(s: LineageSummary) -> str:
        seen = set()
        while s.parent_id in by_id and s.id not in seen:
            seen.add(s.id)
            s = by_id[s.parent_id]
        return s.id

    trees: dict[str, list[LineageSummary]] = {}
    for s in summaries:
        trees.setdefault(root(s), []).append(s)
    return [sorted(t, key=lambda s: (s.id != r, s.created_at)) for r, t in trees.items()]


def _tree_report(
    tree: Sequence[LineageSummary], calls: dict[str, list[Exchange]], prices: PriceBook
) -> tuple[LineageReport, set[str]]:
    order = {s.id: i for i, s in enumerate(tree)}
    exchanges = sorted(
        (x for s in tree for x in calls[s.id] if x.record is not None),
        key=lambda x: (x.started_at, order[x.lineage_id], x.seq),
    )
    roles = {s.id: "fork" if s.parent_id in order else "main" for s in tree}
    priced: list[tuple[Call, Exchange, ModelInfo]] = []
    for n, x in enumerate(exchanges, 1):
        assert x.record is not None
        info = info_for(x.record, prices)
        priced.append((priced_call(n, x.lineage_id, roles[x.lineage_id], x.record, info), x, info))
    misses: list[Miss] = []
    actual = planned = 0.0
    uncached_calls = 0
    previous: dict[str, float] = {}  # lineage -> start of its previous turn call
    for call, x, info in priced:
        if call.record.purpose != "turn":
            continue
        gap = x.started_at - previous[x.lineage_id] if x.lineage_id in previous else None
        previous[x.lineage_id] = x.started_at
        u = call.usage
        verdict = call.record.explanation.verdict
        if verdict == "no_breakpoint":
            uncached_calls += 1
            step = Step(usage=u, shared=x.sent_before, gap=0.0 if gap is None else gap)
            (fixed,) = with_breakpoints([step], info)
            actual, planned = actual + usd(u, info), planned + usd(fixed, info)
        else:
            fixed = read_with_fix(u, x.sent_before)
        lost = max(0, min(x.sent_before, u.input_total) - u.read)
        if lost <= _slack(info):
            continue
        priced_ok = info.price is not None
        saving = usd(u, info) - usd(fixed, info)
        misses.append(
            Miss(
                call=call.number,
                verdict=verdict,
                explanation=str(call.record.explanation),
                fix=_PARTIAL_FIX if verdict == "hit" else FIXES.get(verdict, FIXES["unexplained"]),
                cost_usd=saving if priced_ok else None,
                saving_usd=saving if priced_ok else None,
                read_with_fix=fixed.read,
                replayed=False,
                lost_tokens=lost,
            )
        )
    figures = [_figures(s, calls[s.id], info_of_model(s.model, s.dialect, prices)) for s in tree]
    what_if: tuple[WhatIf, ...] = ()
    if uncached_calls:
        what_if = (
            WhatIf(
                name=OPTIMIZE,
                saving_usd=actual - planned,
                detail=f"{uncached_calls} calls sent no cache breakpoint; with Stoker's, each "
                "reads what the call before it sent and writes only what it adds",
            ),
        )
    root = tree[0]
    report = LineageReport(
        root_id=root.id,
        title=root.title,
        sessions=tuple(
            SessionNode(id=s.id, role=roles[s.id], parent_id=s.parent_id, title=s.title)
            for s in tree
        ),
        calls=tuple(c for c, _, _ in priced),
        misses=tuple(misses),
        replay_checked=False,
        notes=(*(f.line() for f in figures), *_changes(exchanges)),
        what_if=what_if,
        extra={"lineages": [f.to_dict() for f in figures]},
    )
    return report, {c.record.model for c, _, _ in priced if c.cost_usd is None}


async def proxy_report(
    store: ProxyLog, *, prices: PriceBook | None = None, limit: int = 100
) -> Report:
    """The report of the `limit` most recently used lineages (with the trees they are in)."""
    prices = prices or PriceBook()
    summaries = await store.proxy_lineages(limit=limit)
    calls = {s.id: await store.proxy_calls(s.id) for s in summaries}
    lineages: list[LineageReport] = []
    unpriced: set[str] = set()
    for tree in _trees(summaries):
        report, missing = _tree_report(tree, calls, prices)
        lineages.append(report)
        unpriced |= missing
    return Report(
        lineages=tuple(lineages),
        unpriced=tuple(UnknownPrice(m, prices.path) for m in sorted(unpriced)),
        title="Stoker proxy report",
        source="proxied calls",
    )
