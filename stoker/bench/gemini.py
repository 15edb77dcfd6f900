"""The hard workload (`stoker.bench.cache.hard`) on Gemini, in the in-process simulator:
one run on the implicit cache with the time policy's keep-warm pings, one where the time
policy counts only guaranteed discounts and keeps the prefix in explicit caches
(`cachedContents`), with their storage spend set against the reads it bought.

Both are registered in `stoker.bench.providers.PROVIDER_RUNS` ("gemini-implicit",
"gemini-explicit"), which `stoker bench cache --workload providers` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stoker.agent.agent import Agent
from stoker.bench.cache import SYSTEM, TOOLS, Run, Units, WorkloadFigures
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import TimePolicy
from stoker.wire.record import CacheRecord

MODEL = "gemini-2.5-flash"


def _units(run: Run) -> Units:
    """Gemini's prefix units of a request (the simulated provider's own, an explicit
    cache's included), or None for a keep-warm: the ideal counts each distinct one once."""
    google = run.engine.google

    def units(payload: dict[str, Any]) -> list[tuple[str, int]] | None:
        if _is_keep_warm(payload):
            return None
        return google.units(payload, workspace="default")

    return units


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


async def _hard(home: Path, name: str, policy: CachePolicy) -> WorkloadFigures:
    run = Run(home, model=MODEL)
    run.units = _units(run)
    async with run.store() as store:
        agent = _agent(run, policy)
        session = await agent.open(store, "hard")
        run.keep_warm.watch(session)
        await run.turn("24-call tool loop", session, "Audit the service: run 24 steps")
        await run.turn("follow-up", session, "Summarise what you found")
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
    records = [r for phase in run.phases for r in phase.records]
    return with_storage(run.figures(name), records)


async def gemini_implicit(home: Path) -> WorkloadFigures:
    """The implicit cache, crossing the gap with the time policy's pings."""
    return await _hard(home, "gemini-implicit", CachePolicy())


async def gemini_explicit(home: Path) -> WorkloadFigures:
    """The time policy counting only guaranteed discounts (Google promises none for the
    implicit cache): the prefix crosses the gap in an explicit cache."""
    guaranteed = CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0))
    return await _hard(home, "gemini-explicit", guaranteed)


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
