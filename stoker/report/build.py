"""The report of a lineage tree: every call with what it cost and would have cost with no
cache, the totals, and every miss with what it cost and what its fix would have saved.

Costs are the records' own (what the call was billed, by the price known then); a call
recorded without a price is priced now by the user's prices.toml over the catalogue, and
one nobody prices is counted apart, never allowed to hide the known totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from stoker.cache.explain import explain
from stoker.cache.models import Family, ModelInfo, fallback_info, model_info, with_prices
from stoker.cache.prices import PriceBook
from stoker.cache.pricing import CostTotal, cost_usd, sum_costs, uncached_cost_usd
from stoker.errors import ConfigError, UnknownPrice
from stoker.report.counterfactual import read_with_fix
from stoker.report.foresight import foresight_notes
from stoker.report.lineage import (
    SessionNode,
    StoredCall,
    StoredLineage,
    load_lineage,
    root_ids,
    root_of,
)
from stoker.report.replay import faithful, replay
from stoker.store.base import SqlEventStore
from stoker.wire.figures import json_ratio, json_usd
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.usage import Usage

NOT_MISSES = frozenset({"first", "hit", "kept_warm"})

FIXES = {
    "declared": "keep the previous prefix (the change was declared: decide if it was worth it)",
    "diverged": "send the previous bytes unchanged",
    "expired": "a 1-hour TTL on the prefix breakpoint, or a keep-warm ping before expiry",
    "lookback": "an intermediate breakpoint within 20 blocks of the previous write",
    "below_minimum": "a prefix above the model's minimum cacheable length",
    "no_breakpoint": "`stoker proxy --optimize` (it places them), or cache_control on the last "
    "tool or system block and on the newest message block",
    "concurrent": "wait for the first response to start before sending the next request",
    "evicted": "nothing on this side: the provider dropped the entry early",
    "cold": "pre-warm the prefix before the first real request",
    "overflow": "fewer requests per minute on one cache key",
    "rerouted": "a session key (OpenRouter's session_id) so the conversation sticks to one "
    "upstream",
    "unexplained": "nothing known: file an issue with the session's export",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One provider call of the tree, priced."""

    number: int  # 1-based, in time order across the tree
    session_id: str
    role: str
    record: CacheRecord
    cost_usd: float | None
    no_cache_usd: float | None
    storage_usd: float = 0.0  # of `cost_usd`: an explicit cache's storage (Gemini's)

    @property
    def usage(self) -> Usage:
        return self.record.usage

    @property
    def is_miss(self) -> bool:
        return self.record.purpose == "turn" and self.record.explanation.verdict not in NOT_MISSES

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {
            "number": self.number,
            "session_id": self.session_id,
            "role": self.role,
            "seq": r.seq,
            "purpose": r.purpose,
            "model": r.model,
            "started_at": r.started_at,
            "usage": r.usage.to_dict(),
            "cost_usd": json_usd(self.cost_usd),
            "no_cache_usd": json_usd(self.no_cache_usd),
            "verdict": r.explanation.verdict,
            "explanation": str(r.explanation),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Miss:
    """A call that read less than it could have, why, what it cost, and what the fix saves.

    `cost_usd` is this call's cost over what it would have cost with the fix;
    `saving_usd` the same over every call the fix changes (a prefix change makes every
    later call on the new prefix pay again where it writes). `replayed` says whether
    the exact accountant computed them by replaying the calls without the change, or
    they come from this call's own tokens (read what the previous call left cached)."""

    call: int
    lost_tokens: int = 0  # what it fell short of reading, of what was there before it
    verdict: str
    explanation: str
    fix: str
    cost_usd: float | None
    saving_usd: float | None
    read_with_fix: int
    replayed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "cost_usd": json_usd(self.cost_usd),
            "saving_usd": json_usd(self.saving_usd),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIf:
    """What another choice would have saved over what was paid: Stoker's planner or time
    policy on traffic that did without them, or `stoker proxy --optimize` in front of it.
    `saving_usd` is None when no call it changes has a price."""

    name: str
    saving_usd: float | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "saving_usd": json_usd(self.saving_usd)}

    def __str__(self) -> str:
        saved = "an unknown amount" if self.saving_usd is None else f"${self.saving_usd:,.5f}"
        return f"{self.name} would have saved {saved}: {self.detail}"


def what_ifs(found: Sequence[WhatIf]) -> tuple[WhatIf, ...]:
    """Several lineages' what-ifs added up by name (details joined once each)."""
    by_name: dict[str, list[WhatIf]] = {}
    for w in found:
        by_name.setdefault(w.name, []).append(w)
    out = []
    for name, ws in by_name.items():
        known = [w.saving_usd for w in ws if w.saving_usd is not None]
        detail = ws[0].detail if len(ws) == 1 else f"over {len(ws)} conversations"
        out.append(WhatIf(name=name, saving_usd=sum(known) if known else None, detail=detail))
    return tuple(out)


def _money(total: CostTotal) -> dict[str, Any]:
    return {
        "usd": json_usd(total.usd),
        "priced_calls": total.priced,
        "unpriced_calls": total.unpriced,
    }


class Totals:
    """What a set of calls used and cost; the one definition of the savings figure."""

    __slots__ = ()

    @property
    def calls(self) -> tuple[Call, ...]:
        raise NotImplementedError

    @property
    def usage(self) -> Usage:
        return Usage.total(c.usage for c in self.calls)

    @property
    def cost(self) -> CostTotal:
        return sum_costs(c.cost_usd for c in self.calls)

    @property
    def no_cache_cost(self) -> CostTotal:
        return sum_costs(c.no_cache_usd for c in self.calls)

    @property
    def storage_usd(self) -> float:
        """What explicit caches cost in storage (Gemini's), counted in `cost` too."""
        return sum(c.storage_usd for c in self.calls)

    @property
    def savings_usd(self) -> float:
        """What the cache saved over sending the same tokens uncached (priced calls only)."""
        return sum(
            c.no_cache_usd - c.cost_usd
            for c in self.calls
            if c.cost_usd is not None and c.no_cache_usd is not None
        )


def totals_dict(t: Totals) -> dict[str, Any]:
    return {
        "usage": t.usage.to_dict(),
        "hit_ratio": json_ratio(t.usage.hit_ratio),
        "cost": _money(t.cost),
        "no_cache_cost": _money(t.no_cache_cost),
        "savings_usd": json_usd(t.savings_usd),
        **({"storage_usd": json_usd(t.storage_usd)} if t.storage_usd else {}),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionReport(Totals):
    """One session of a tree (the main one, a fork, a review, a sub-agent) and its calls."""

    session: SessionNode
    calls: tuple[Call, ...]

    def to_dict(self) -> dict[str, Any]:
        s = self.session
        return {"id": s.id, "role": s.role, "parent_id": s.parent_id, **totals_dict(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageReport(Totals):
    """A tree of sessions (or of proxied conversations, or of traced ones). `notes`: lines
    a source adds under it (the proxy's writes against the ideal, what it rewrote);
    `extra`: the same as data, in the JSON under the source's own key."""

    root_id: str
    title: str
    sessions: tuple[SessionNode, ...]
    calls: tuple[Call, ...]
    misses: tuple[Miss, ...]
    replay_checked: bool  # the as-sent replay reproduced every recorded call
    notes: tuple[str, ...] = ()
    what_if: tuple[WhatIf, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def by_session(self) -> tuple[SessionReport, ...]:
        """Each session of the tree with its own calls, parents first."""
        return tuple(
            SessionReport(session=s, calls=tuple(c for c in self.calls if c.session_id == s.id))
            for s in self.sessions
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "root_id": self.root_id,
            "title": self.title,
            "sessions": [s.to_dict() for s in self.by_session()],
            **totals_dict(self),
            "replay_checked": self.replay_checked,
            "calls": [c.to_dict() for c in self.calls],
            "misses": [m.to_dict() for m in self.misses],
            "notes": list(self.notes),
            "what_if": [w.to_dict() for w in self.what_if],
            **self.extra,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Report(Totals):
    """`title` heads the page; `source` says what was read (a database, a trace file);
    `notes` what the figures assume; `what_if` the lineages' what-ifs added up."""

    lineages: tuple[LineageReport, ...]
    unpriced: tuple[UnknownPrice, ...] = field(default=())  # one per model nobody prices
    title: str = "Stoker cache report"
    source: str = ""
    notes: tuple[str, ...] = ()

    @property
    def calls(self) -> tuple[Call, ...]:
        return tuple(c for lineage in self.lineages for c in lineage.calls)

    @property
    def what_if(self) -> tuple[WhatIf, ...]:
        return what_ifs([w for lineage in self.lineages for w in lineage.what_if])

    def to_dict(self) -> dict[str, Any]:
        return {
            **totals_dict(self),
            "title": self.title,
            "source": self.source,
            "notes": list(self.notes),
            "what_if": [w.to_dict() for w in self.what_if],
            "unpriced": [str(u) for u in self.unpriced],
            "lineages": [lineage.to_dict() for lineage in self.lineages],
        }


def info_of_model(model: str, provider: str, prices: PriceBook) -> ModelInfo:
    """`model`'s facts priced by `prices` over the catalogue; a model the table does not
    know gets its provider's usual cache rules (`provider`: anthropic, or anything else
    for OpenAI's, as a wire name like openai_chat)."""
    try:
        info = model_info(model)
    except ConfigError:
        info = fallback_info(model, family_of_provider(provider))
    return with_prices(info, prices, model)


def family_of_provider(provider: str) -> Family:
    """The model family whose usual rules a provider's unknown model follows: a local
    server's (`openai-compatible+vllm`, ...) costs nothing; OpenAI's for the rest."""
    if provider.startswith("openai-compatible+"):
        return "local"
    known: dict[str, Family] = {
        "anthropic": "anthropic",
        "bedrock": "bedrock",
        "bedrock_converse": "bedrock",
        "openrouter": "openrouter",
        "deepseek": "deepseek",
    }
    return known.get(provider, "openai")


def info_for(record: CacheRecord, prices: PriceBook) -> ModelInfo:
    return info_of_model(record.model, record.provider, prices)


def _usd(usage: Usage, info: ModelInfo) -> float:
    return cost_usd(usage, info) or 0.0


def _read_with_fix(call: Call, previous: Call | None) -> Usage:
    """This call's usage had it read everything the session's previous call left cached."""
    if previous is None:
        return call.usage
    return read_with_fix(call.usage, previous.usage.read + previous.usage.written)


def priced_call(
    number: int, session_id: str, role: str, record: CacheRecord, info: ModelInfo
) -> Call:
    """A call priced as the report prices: the record's own cost, or `info`'s now."""
    storage = record.storage_token_hours * (info.storage or 0.0) / 1_000_000
    lifecycle = record.purpose.startswith("cache_")  # an explicit cache's create/extend/delete
    return Call(
        number=number,
        session_id=session_id,
        role=role,
        record=record,
        cost_usd=record.cost_usd if record.cost_usd is not None else cost_usd(record.usage, info),
        # with no cache there is no cache object to make, extend or delete
        no_cache_usd=0.0 if lifecycle else uncached_cost_usd(record.usage, info),
        storage_usd=storage,
    )


def usd(usage: Usage, info: ModelInfo) -> float:
    """What `usage` cost on `info`'s model, 0 where nobody prices it."""
    return cost_usd(usage, info) or 0.0


def _where(e: Explanation, call: StoredCall, previous: StoredCall | None) -> str:
    """The record's explanation; for a declared break, also the slot that moved (a
    declared break's record carries only its reason)."""
    if e.verdict != "declared" or call.request is None or previous is None:
        return str(e)
    if previous.request is None:
        return str(e)
    moved = explain(previous.request, call.request, usage=call.record.usage)
    return f"{e} (changed: {moved.slot})" if moved.slot else str(e)


def _changed_from(call: StoredCall, previous: StoredCall | None) -> Prefix | None:
    """The prefix `call`'s session sent before, when `call` sent another one."""
    if previous is None or previous.prefix is None:
        return None
    key = call.record.fingerprints.prefix_key
    return None if previous.record.fingerprints.prefix_key == key else previous.prefix


def _misses(
    calls: Sequence[Call], stored: Sequence[StoredCall], infos: Sequence[ModelInfo]
) -> tuple[tuple[Miss, ...], bool]:
    as_sent = faithful(stored) if all(i.provider == "anthropic" for i in infos) else None
    previous: dict[str, int] = {}  # session id -> index of its previous call
    misses: list[Miss] = []
    for i, call in enumerate(calls):
        before = previous.get(call.session_id)
        if call.record.purpose == "turn":
            previous[call.session_id] = i
        if not call.is_miss:
            continue
        info, e = infos[i], call.record.explanation
        old = _changed_from(stored[i], stored[before] if before is not None else None)
        fixed = None
        if as_sent is not None and old is not None:
            fixed = replay(stored, swap={call.record.fingerprints.prefix_key: old})
        elif as_sent is not None and e.verdict == "expired":
            fixed = replay(stored, ttl="1h")
        if as_sent is not None and fixed is not None:
            deltas = [
                _usd(a, infos[j]) - _usd(f, infos[j])
                for j, (a, f) in enumerate(zip(as_sent, fixed, strict=True))
            ]
            miss_cost, saving, read = deltas[i], sum(deltas), fixed[i].read
        else:
            with_fix = _read_with_fix(call, calls[before] if before is not None else None)
            miss_cost = _usd(call.usage, info) - _usd(with_fix, info)
            saving, read = miss_cost, with_fix.read
        priced = info.price is not None
        misses.append(
            Miss(
                call=call.number,
                verdict=e.verdict,
                explanation=_where(e, stored[i], stored[before] if before is not None else None),
                fix=FIXES.get(e.verdict, FIXES["unexplained"]),
                cost_usd=miss_cost if priced else None,
                saving_usd=saving if priced else None,
                read_with_fix=read,
                replayed=fixed is not None,
                lost_tokens=max(0, read - call.usage.read),
            )
        )
    return tuple(misses), as_sent is not None


def lineage_report(lineage: StoredLineage, prices: PriceBook) -> tuple[LineageReport, set[str]]:
    """The report of one tree, and the models in it that nobody prices."""
    roles = {s.id: s.role for s in lineage.sessions}
    infos = [info_for(c.record, prices) for c in lineage.calls]
    calls = tuple(
        priced_call(
            n, c.record.session_id, roles.get(c.record.session_id, c.record.role), c.record, info
        )
        for n, (c, info) in enumerate(zip(lineage.calls, infos, strict=True), 1)
    )
    misses, checked = _misses(calls, lineage.calls, infos)
    title = next((s.title for s in lineage.sessions if s.id == lineage.root_id), "")
    unpriced = {c.record.model for c in calls if c.cost_usd is None}
    notes, foresight = foresight_notes(
        [(c.number, c.record) for c in calls], next(iter(infos), None)
    )
    report = LineageReport(
        root_id=lineage.root_id,
        title=title,
        sessions=lineage.sessions,
        calls=calls,
        misses=misses,
        replay_checked=checked,
        notes=notes,
        extra={"foresight": foresight} if foresight else {},
    )
    return report, unpriced


async def build_report(
    store: SqlEventStore, session_id: str | None, *, prices: PriceBook
) -> Report:
    """The report of `session_id`'s whole tree (from its root), or of every tree when None."""
    roots = [await root_of(store, session_id)] if session_id else await root_ids(store)
    lineages: list[LineageReport] = []
    unpriced: set[str] = set()
    for root in roots:
        lineage, missing = lineage_report(await load_lineage(store, root), prices)
        lineages.append(lineage)
        unpriced |= missing
    return Report(
        lineages=tuple(lineages),
        unpriced=tuple(UnknownPrice(m, prices.path) for m in sorted(unpriced)),
    )
