"""The hard workload (`stoker.bench.cache.hard`) on Gemini, in the in-process simulator:
one run on the implicit cache with the time policy's keep-warm pings, one where the time
policy counts only guaranteed discounts and keeps the prefix in explicit caches
(`cachedContents`), with their storage spend set against the reads it bought.

Both are registered in `stoker.bench.providers.PROVIDER_RUNS` ("gemini-implicit",
"gemini-explicit"), which `stoker bench cache --workload providers` runs.

Each run is held to the floor of its own kind of cache (`floor_units`): the distinct prefix
tokens written once and the rest read, as every provider's row, plus the least that kind
of cache must spend to carry what the call after the 6-minute gap reads across it
(`crossing_floor`): Gemini's implicit entries live 180 s, so no strategy crosses the gap
for free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from stoker.agent.agent import Agent
from stoker.bench.cache import SYSTEM, TOOLS, Run, WorkloadFigures
from stoker.cache.models import ModelInfo, model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.storage import storage_rate
from stoker.cache.time_policy import TimePolicy
from stoker.wire.record import CacheRecord

MODEL = "gemini-2.5-flash"

Kind = Literal["implicit", "explicit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Crossing:
    """An idle gap and what the first call after it read of what was sent before it."""

    seconds: float  # from the last call before the gap to the first after it
    carried: int  # tokens of that call first sent before the gap
    first_request: int  # of those, tokens of the session's first request


def crossing_floor(kind: Kind, crossing: Crossing, info: ModelInfo) -> float:
    """The least the ideal strategy of one kind of cache spends carrying `crossing.carried`
    tokens across an idle gap, beyond reading them after it (base-input tokens): the
    cheaper of rewriting them at the return (`write_5m - read` each) and holding them.

    - "implicit": an entry lives `idle_ttl` after its last read, so holding it takes
      `floor(seconds / idle_ttl)` keep-warm reads (at `read` each) in the gap.
    - "explicit": a cache is billed for storage (`storage_rate` per token-hour) while it
      exists, and its tokens at the creation price (`write_1h`) when it is made. Only what
      a cache made before the session's first call holds (that request's tokens) was
      never billed before: holding it costs the storage, and the first call reads what it
      would otherwise have written (`write_1h + read - write_5m`: `read` on Gemini).
      Every other token had been billed when first sent, and a cache is immutable, so
      holding it means creating it again, which costs the creation whenever it is made
      (at the return it needs no storage) unless a rewrite at the return is cheaper.

    For one gap (the first request's cache is paid for once); a lower bound that counts no
    storage outside idle gaps, exact on this workload, whose calls within a turn start at
    one instant of the frozen clock.
    """
    rewrite = info.write_5m - info.read
    if kind == "implicit":
        reads = math.floor(crossing.seconds / info.idle_ttl) if info.idle_ttl else math.inf
        return min(reads * info.read, rewrite) * crossing.carried
    rate = storage_rate(info)
    first_read = info.write_1h + info.read - info.write_5m
    hold = math.inf if rate is None else rate * crossing.seconds / 3600.0 + first_read
    again = min(info.write_1h, rewrite)
    return min(hold, again) * crossing.first_request + again * (
        crossing.carried - crossing.first_request
    )


def floor_units(
    kind: Kind, info: ModelInfo, *, spent: int, ideal: int, crossings: list[Crossing]
) -> float:
    """The input cost of the ideal of one kind of cache on a run of `spent` input tokens
    (base-input tokens): every distinct prefix token written once (`ideal`; on Gemini an
    implicit write and a cache's creation are both billed as input), every other input
    token read, and each idle gap crossed at the least its kind of cache allows
    (`crossing_floor`)."""
    tokens = info.write_5m * ideal + info.read * (spent - ideal)
    return tokens + sum(crossing_floor(kind, c, info) for c in crossings)


class _Sent:
    """Gemini's prefix units of each request in the order the run counts them (the
    simulated provider's own, an explicit cache's included; keep-warm requests left out:
    the ideal counts each distinct unit once), kept to find what a gap carried."""

    def __init__(self, run: Run) -> None:
        self._google = run.engine.google
        self.requests: list[list[tuple[str, int]]] = []

    def __call__(self, payload: dict[str, Any]) -> list[tuple[str, int]] | None:
        if _is_keep_warm(payload):
            return None
        units = self._google.units(payload, workspace="default")
        self.requests.append(units)
        return units

    def crossing(self, before: int, seconds: float) -> Crossing:
        """What the first request after the first `before` ones carried across a gap."""
        first = {key for key, _ in self.requests[0]}
        seen = {key for units in self.requests[:before] for key, _ in units}
        carried = [(key, n) for key, n in self.requests[before] if key in seen]
        return Crossing(
            seconds=seconds,
            carried=sum(n for _, n in carried),
            first_request=sum(n for key, n in carried if key in first),
        )


def _is_keep_warm(payload: dict[str, Any]) -> bool:
    contents = payload.get("contents") or []
    last = contents[-1]["parts"] if contents else []
    return any("keep-warm request" in str(p.get("text", "")) for p in last)


def _agent(run: Run, policy: CachePolicy) -> Agent:
    return Agent(
        MODEL,
        provider=run.provider(),
        tools=TOOLS,
        system=SYSTEM,
        clock=run.clock,
        key_shards=run.key_shards,
        fleet=run.fleet,
        cache_policy=policy,
        keep_warm=False,
    )


def _turns(run: Run, name: str) -> list[CacheRecord]:
    return [r for p in run.phases if p.name == name for r in p.turn_calls()]


async def _hard(home: Path, name: str, kind: Kind, policy: CachePolicy) -> WorkloadFigures:
    run = Run(home, model=MODEL)
    sent = _Sent(run)
    run.units = sent
    async with run.store() as store:
        agent = _agent(run, policy)
        session = await agent.open(store, "hard")
        run.keep_warm.watch(session)
        await run.turn("24-call tool loop", session, "Audit the service: run 24 steps")
        await run.turn("follow-up", session, "Summarise what you found")
        before = len(sent.requests)
        await run.gap("6-minute gap", 360)
        await run.turn("after the gap", session, "What should we fix first?")
        with run.phase("fork"):
            await session.fork(role="review").send("Anything worth remembering?")
        with run.phase("close"):  # the process ends: its explicit caches are deleted
            await agent.aclose()
    async with run.store() as store:  # a new process: new agent, provider and store
        agent = _agent(run, policy)
        resumed = await agent.open(store, "hard", create=False)
        run.keep_warm.watch(resumed)
        await run.turn("resume in a new process", resumed, "Fix the first one: run 3 steps")
        with run.phase("close"):
            await agent.aclose()
    gap = _turns(run, "after the gap")[0].started_at - _turns(run, "follow-up")[-1].started_at
    records = [r for phase in run.phases for r in phase.records]
    figures = with_floor(run.figures(name), kind, records, [sent.crossing(before, gap)])
    return with_storage(figures, records)


def with_floor(
    figures: WorkloadFigures, kind: Kind, records: list[CacheRecord], crossings: list[Crossing]
) -> WorkloadFigures:
    """`figures` whose total is held to the floor of its kind of cache (`floor_units`), and
    counts as written every token billed at the write price: a cache's creation and, as
    Gemini stores uncached input in its implicit cache, every uncached token."""
    turns = [r for r in records if r.purpose == "turn"]
    total = figures.total
    spent = sum(r.usage.input_total for r in turns)
    info = model_info(MODEL)
    units = floor_units(kind, info, spent=spent, ideal=total.ideal, crossings=crossings)
    written = sum(r.usage.written + r.usage.uncached for r in records)
    held = replace(total, floor_ratio=units / spent if spent else 0.0, written=written)
    return replace(figures, total=held)


async def gemini_implicit(home: Path) -> WorkloadFigures:
    """The implicit cache, crossing the gap with the time policy's pings."""
    return await _hard(home, "gemini-implicit", "implicit", CachePolicy())


async def gemini_explicit(home: Path) -> WorkloadFigures:
    """The time policy counting only guaranteed discounts (Google promises none for the
    implicit cache): the prefix crosses the gap in an explicit cache."""
    guaranteed = CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0))
    return await _hard(home, "gemini-explicit", "explicit", guaranteed)


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageFigures:
    """What a run's explicit caches cost against what they bought (base-input tokens)."""

    created: int  # tokens written into caches (billed as input)
    token_hours: float  # storage billed
    storage_units: float
    reads: int  # tokens requests read from those caches
    saved_units: float  # what those reads saved against sending the tokens uncached

    def line(self) -> str:
        spent = self.created + self.storage_units
        return (
            f"explicit caches: {self.created:,} tokens created and {self.token_hours:,.2f} "
            f"token-hours stored ({spent:,.0f} base-input tokens) bought reads of "
            f"{self.reads:,} tokens (saving {self.saved_units:,.0f})"
        )


def storage_figures(records: list[CacheRecord]) -> StorageFigures:
    """The storage side of a run: its lifecycle records against the reads of its turns
    that named a cache (`CacheRecord.cache_read`)."""
    info = model_info(MODEL)
    rate = (info.storage or 0.0) / (info.input or 1.0)
    created = sum(r.usage.written for r in records if r.purpose == "cache_create")
    hours = sum(r.storage_token_hours for r in records)
    reads = sum(r.cache_read for r in records)
    return StorageFigures(
        created=created,
        token_hours=hours,
        storage_units=hours * rate,
        reads=reads,
        saved_units=reads * (1.0 - info.read),
    )


def with_storage(figures: WorkloadFigures, records: list[CacheRecord]) -> WorkloadFigures:
    """`figures` with the storage line among its notes (printed under its table)."""
    return replace(figures, notes=(*figures.notes, storage_figures(records).line()))
