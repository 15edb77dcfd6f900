"""A trace's calls as `stoker report` reports a session: cost, savings, every miss with its
cause and its fix, and what Stoker's planner and time policy would have saved.

A trace holds usage and times, not request bytes, so each call is explained from what
the call before it in the conversation left cached (read and written, or, on OpenAI's
implicit regime, everything it sent) and the time between them:

- it read all of that: a hit;
- it read and wrote nothing on a model whose requests choose what to cache: no
  breakpoint (or a prefix under the model's minimum);
- it fell short after a gap longer than the entry's TTL: an expiry (the gap, then a
  rewrite), costed as `stoker report` costs one, with every entry written for an hour;
- it fell short within the TTL: what Stoker's own span said of it where it said
  something, else unexplained (a changed prefix, a concurrent request, an eviction).

What-ifs, from the same usage (`stoker.report.counterfactual`): Stoker's time policy
across each expiry's gap (the pings or seal it would have sent, against the rewrite),
and Stoker's planner on conversations sent with no breakpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stoker.audit.calls import Conversation, TracedCall, conversations
from stoker.audit.otlp import Span, read_spans
from stoker.cache.models import ModelInfo
from stoker.cache.prices import PriceBook
from stoker.cache.time_policy import TimePolicy, lifetimes
from stoker.errors import UnknownPrice
from stoker.report.build import (
    FIXES,
    NOT_MISSES,
    LineageReport,
    Miss,
    Report,
    WhatIf,
    info_of_model,
    priced_call,
    usd,
)
from stoker.report.counterfactual import (
    Step,
    keep_warm,
    one_hour,
    read_with_fix,
    with_breakpoints,
)
from stoker.report.lineage import SessionNode
from stoker.wire.fingerprint import SlotFingerprints
from stoker.wire.record import CacheRecord, Explanation

_NO_FINGERPRINTS = SlotFingerprints(
    params="", tools=(), system="", history="", message_count=0, new_from=0, new_messages=()
)
PLANNER = "Stoker's planner"
TIME_POLICY = "Stoker's time policy"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Judged:
    call: TracedCall
    info: ModelInfo
    explanation: Explanation
    cached_before: int  # what the conversation had cached when the call began
    sent_before: int  # what the call before it sent (of this call's input)
    gap: float | None  # seconds since the entry was last used
    lost: int


def _ttl(info: ModelInfo, long_lived: bool) -> float:
    menu = lifetimes(info)
    if menu is not None:
        return menu.long if long_lived else menu.short
    return info.idle_ttl or 1800.0


def _slack(info: ModelInfo) -> int:
    return info.interval + 16 if info.regime == "L" else 0


def _judge(conv: Conversation, prices: PriceBook) -> list[_Judged]:
    out: list[_Judged] = []
    cached, sent, last_used, long_lived = 0, 0, None, False
    for call in conv.calls:
        home = "anthropic" if "anthropic" in call.provider else "openai"
        info = info_of_model(call.model, home, prices)
        u = call.usage
        gap = None if last_used is None else call.started_at - last_used
        implicit = info.regime == "L"
        before = min(cached, u.input_total)
        lost = max(0, before - u.read)
        explanation = _explain(call, info, gap, before, lost, long_lived, first=last_used is None)
        out.append(
            _Judged(
                call=call,
                info=info,
                explanation=explanation,
                cached_before=before,
                sent_before=min(sent, u.input_total),
                gap=gap,
                lost=lost,
            )
        )
        if call.purpose == "turn":
            sent = u.input_total
        if call.purpose == "turn" or u.read or u.written:
            cached = u.input_total if implicit else u.read + u.written
            long_lived = u.written_1h > 0 or (long_lived and call.purpose != "turn")
            last_used = call.started_at
    return out


def _explain(
    call: TracedCall,
    info: ModelInfo,
    gap: float | None,
    before: int,
    lost: int,
    long_lived: bool,
    *,
    first: bool,
) -> Explanation:
    u = call.usage
    if call.purpose != "turn":
        if u.read:
            return Explanation(verdict="kept_warm", detail=f"{call.purpose} sent by Stoker")
        return Explanation(verdict="expired", detail=f"{call.purpose}: the entry was gone")
    chooses = info.regime != "L"  # requests say what to cache (markers, or explicit mode)
    if call.cache_known and chooses and not u.read and not u.written:
        if u.input_total < info.min_cacheable:
            return Explanation(
                verdict="below_minimum",
                detail=f"the {u.input_total:,}-token prompt is under the model's minimum of "
                f"{info.min_cacheable:,}",
            )
        return Explanation(
            verdict="no_breakpoint",
            detail="nothing was read or written: the request has no cache breakpoint",
        )
    if first:
        if u.read:
            return Explanation(verdict="hit", detail=f"read {u.read:,} tokens on a first call")
        return Explanation(verdict="first", detail="first call of this conversation")
    if lost <= _slack(info):
        return Explanation(verdict="hit", detail=f"read {u.read:,} of {u.input_total:,} tokens")
    ttl = _ttl(info, long_lived)
    if gap is not None and gap > ttl:
        return Explanation(
            verdict="expired",
            detail=f"read {u.read:,} of the {before:,} tokens cached before: {gap:.0f} s "
            f"since the entry was last used, longer than its {ttl:.0f} s TTL; "
            f"{lost:,} tokens written again",
        )
    if call.verdict is not None and call.verdict not in NOT_MISSES and call.explanation:
        detail = call.explanation.partition(": ")[2]
        return Explanation(verdict=call.verdict, detail=detail or call.explanation)  # type: ignore[arg-type]
    return Explanation(
        verdict="unexplained",
        detail=f"read {u.read:,} of the {before:,} tokens cached before, within the TTL: a "
        "changed prefix, a concurrent request or an eviction (a trace holds no request "
        "bytes to tell which)",
    )


def _record(judged: _Judged, seq: int) -> CacheRecord:
    call = judged.call
    return CacheRecord(
        session_id=call.conversation,
        seq=seq,
        role=call.role,
        provider=judged.info.provider,
        model=call.model,
        started_at=call.started_at,
        fingerprints=_NO_FINGERPRINTS,
        breakpoints=(),
        usage=call.usage,
        cost_usd=None,  # priced by the report, as the user's prices say
        explanation=judged.explanation,
        purpose=call.purpose,
    )


def _tree(
    convs: Sequence[Conversation], prices: PriceBook, policy: TimePolicy
) -> tuple[LineageReport, set[str]]:
    judged = [(conv, j) for conv in convs for j in _judge(conv, prices)]

    def when(i: int) -> tuple[float, float, int]:
        call = judged[i][1].call
        return call.started_at, call.ended_at, call.order

    order = sorted(range(len(judged)), key=when)
    seqs: dict[str, int] = {}
    calls, items = [], []
    for number, i in enumerate(order, 1):
        conv, j = judged[i]
        seq = seqs.get(conv.id, 0)
        seqs[conv.id] = seq + 1
        calls.append(priced_call(number, conv.id, conv.role, _record(j, seq), j.info))
        items.append(j)
    anthropic = all(j.info.provider == "anthropic" for j in items)
    expired = [
        j.explanation.verdict == "expired" and j.call.purpose == "turn" and (j.gap or 0) <= 3600
        for j in items
    ]
    fixed_1h = (
        one_hour([j.call.usage for j in items], expired, [j.cached_before for j in items])
        if anthropic
        else None
    )
    deltas = (
        [usd(a.call.usage, a.info) - usd(f, a.info) for a, f in zip(items, fixed_1h, strict=True)]
        if fixed_1h is not None
        else None
    )
    misses: list[Miss] = []
    for k, (call, j) in enumerate(zip(calls, items, strict=True)):
        u, verdict = call.usage, j.explanation.verdict
        if not call.is_miss:
            continue
        if verdict == "no_breakpoint":
            step = Step(usage=u, shared=j.sent_before, gap=j.gap)
            (fixed,) = with_breakpoints([step], j.info)
            if not fixed.read:
                continue
            cost = saving = usd(u, j.info) - usd(fixed, j.info)
        elif j.lost <= _slack(j.info):
            continue
        elif deltas is not None and fixed_1h is not None and verdict == "expired":
            fixed = fixed_1h[k]
            cost, saving = deltas[k], sum(deltas)
        else:
            fixed = read_with_fix(u, j.cached_before)
            cost = saving = usd(u, j.info) - usd(fixed, j.info)
        read = fixed.read
        priced_ok = j.info.price is not None
        misses.append(
            Miss(
                call=call.number,
                verdict=j.explanation.verdict,
                explanation=str(j.explanation),
                fix=FIXES.get(j.explanation.verdict, FIXES["unexplained"]),
                cost_usd=cost if priced_ok else None,
                saving_usd=saving if priced_ok else None,
                read_with_fix=read,
                replayed=deltas is not None and verdict == "expired",
                lost_tokens=max(0, read - u.read),
            )
        )
    root = convs[0]
    report = LineageReport(
        root_id=root.id,
        title=root.id,
        sessions=tuple(
            SessionNode(
                id=c.id, role=c.role if c.parent_id else "main", parent_id=c.parent_id, title=""
            )
            for c in convs
        ),
        calls=tuple(calls),
        misses=tuple(misses),
        replay_checked=False,
        what_if=_what_ifs(convs, prices, policy),
    )
    return report, {c.record.model for c in calls if c.cost_usd is None}


def _what_ifs(
    convs: Sequence[Conversation], prices: PriceBook, policy: TimePolicy
) -> tuple[WhatIf, ...]:
    out: list[WhatIf] = []
    planner_actual = planner_fixed = 0.0
    planned = 0
    warm_saved = 0.0
    gaps_kept = gaps_seen = pings = seals = 0
    for conv in convs:
        judged = _judge(conv, prices)
        turns = [j for j in judged if j.call.purpose == "turn"]
        if (
            turns
            and all(j.explanation.verdict == "no_breakpoint" for j in turns[1:])
            and turns[-1].explanation.verdict in ("no_breakpoint", "first")
        ):
            steps: list[Step] = []
            previous: _Judged | None = None
            for j in turns:
                u = j.call.usage
                shared = (
                    0 if previous is None else min(previous.call.usage.input_total, u.input_total)
                )
                since = None if previous is None else j.call.started_at - previous.call.started_at
                steps.append(Step(usage=u, shared=shared, gap=since))
                previous = j
            info = turns[0].info
            fixed = with_breakpoints(steps, info)
            if any(f.read for f in fixed):
                planned += len(turns)
                planner_actual += sum(usd(s.usage, info) for s in steps)
                planner_fixed += sum(usd(f, info) for f in fixed)
        seen_gaps: list[float] = []
        for k, j in enumerate(judged):
            if j.gap is not None and j.call.purpose == "turn":
                expiry = j.explanation.verdict == "expired" and j.gap > _ttl(j.info, False)
                if expiry and lifetimes(j.info) is not None:
                    prev = judged[k - 1].call
                    gaps_seen += 1
                    kept = keep_warm(
                        info=j.info,
                        policy=policy,
                        started=prev.started_at,
                        back_at=j.call.started_at,
                        cached=j.cached_before,
                        tail=prev.usage.output,
                        long_lived=prev.usage.written_1h > 0,
                        gaps=tuple(seen_gaps),
                    )
                    price = (j.info.input or 0.0) / 1_000_000
                    rewrite = usd(j.call.usage, j.info) - usd(
                        read_with_fix(j.call.usage, j.cached_before), j.info
                    )
                    warm_saved += (rewrite if kept.kept else 0.0) - kept.cost * price
                    gaps_kept += kept.kept
                    pings, seals = pings + kept.pings, seals + kept.seals
                seen_gaps.append(float(j.gap))
    if planned:
        out.append(
            WhatIf(
                name=PLANNER,
                saving_usd=planner_actual - planner_fixed,
                detail=f"{planned} calls sent no cache breakpoint; with Stoker's each reads "
                "what the call before it sent and writes what it adds",
            )
        )
    if gaps_seen:
        out.append(
            WhatIf(
                name=TIME_POLICY,
                saving_usd=warm_saved,
                detail=f"{gaps_kept} of {gaps_seen} expired gaps kept warm with {pings} pings "
                f"and {seals} seals, instead of rewriting the prefix",
            )
        )
    return tuple(out)


def _trees(convs: Sequence[Conversation]) -> list[list[Conversation]]:
    by_id = {c.id: c for c in convs}

    def root(c: Conversation) -> str:
        seen: set[str] = set()
        while c.parent_id is not None and c.parent_id in by_id and c.id not in seen:
            seen.add(c.id)
            c = by_id[c.parent_id]
        return c.id

    trees: dict[str, list[Conversation]] = {}
    for c in convs:
        trees.setdefault(root(c), []).append(c)
    return [sorted(t, key=lambda c: c.id != r) for r, t in trees.items()]


def audit_spans(
    spans: Sequence[Span],
    *,
    prices: PriceBook | None = None,
    policy: TimePolicy | None = None,
    source: str = "",
) -> Report:
    """The report of the model calls among `spans`."""
    prices = prices or PriceBook()
    policy = policy or TimePolicy()
    convs, unnamed = conversations(spans)
    lineages, unpriced = [], set()
    for tree in _trees(convs):
        lineage, missing = _tree(tree, prices, policy)
        lineages.append(lineage)
        unpriced |= missing
    calls = [c for conv in convs for c in conv.calls]
    notes = []
    if unnamed:
        notes.append(
            f"{unnamed} calls carry no gen_ai.conversation.id: grouped by trace where a trace "
            "holds several, else by service and model"
        )
    unknown = sum(1 for c in calls if not c.cache_known)
    if unknown:
        notes.append(
            f"{unknown} calls carry no cache figures (gen_ai.usage.cache_read / cache_creation): "
            "their instrumentation did not record them, so they count as uncached"
        )
    split = sum(1 for c in calls if c.usage.written and not c.ttl_known)
    if split:
        notes.append(
            f"{split} calls do not say which TTL their writes had: priced at the 5-minute rate"
        )
    return Report(
        lineages=tuple(lineages),
        unpriced=tuple(UnknownPrice(m, prices.path) for m in sorted(unpriced)),
        title="Stoker audit",
        source=source,
        notes=tuple(notes),
    )


def audit_file(
    path: Path, *, prices: PriceBook | None = None, policy: TimePolicy | None = None
) -> Report:
    """`stoker audit FILE`: the report of the model calls in an OTLP JSON trace file."""
    spans = read_spans(path)
    return audit_spans(spans, prices=prices, policy=policy, source=f"{path}: {len(spans)} spans")
