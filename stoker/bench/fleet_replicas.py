"""`stoker bench gateway --replicas 4 --workload fleet`: one agent's fresh sessions spread
over gateway replicas on one database.

The fleet workload of `stoker bench cache` (`bench/fleet.py`) run through the gateway:
fresh sessions of one agent, each a short job, arriving at a steady rate; each new
session goes to a random replica, as a load balancer without affinity sends it. The
replicas are `Gateway` instances in this process on one simulated clock, each with its
own agents, key shards and fleet watch and its own store connection, so they share
nothing but the database and the provider, as processes would; the clock lets an hour
of arrivals run in seconds with every keep-warm and fleet sync at its due time.

For each wire and rate it runs one gateway, then the replicas with their fleet notes
shared through the store (`gateway/fleet_sync.py`), then the replicas each deciding
from its own share (how replicas behaved before the notes) and reports the share of
first calls that read the whole shared prefix, the calls that overflowed to a cold
machine, and the keep-warm calls on the shared tools+system entry.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.table import Table

from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.bench.fleet import JOB
from stoker.bench.tables import figures_table
from stoker.cache.models import model_info
from stoker.cache.record import observe_records
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.gateway.providers import ProviderRoute
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.base import Provider
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.store.open import open_store as store_at
from stoker.tools import ToolRegistry, Toolset
from stoker.wire.figures import json_ratio
from stoker.wire.record import CacheRecord

WIRES = {"anthropic": DEFAULT_MODEL, "openai gpt-5 (L)": "gpt-5"}
RATES = (10.0, 60.0)  # new sessions a minute, as the issue asks
SLOW_MINUTES = 8.0  # and one slower than the 5-minute TTL, where the fleet's keep-warm acts
USER = "bench"
SHARED_DETAIL = "shared tools+system"  # how a keep-warm of the shared entry explains itself

OpenStore = Callable[[], Awaitable[SqlEventStore]]
"""A new connection to the one database the replicas share (each replica opens its own)."""
NewDatabase = Callable[[], Awaitable[OpenStore]]
"""A fresh, empty database for one run: how to connect to it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetReplicaFigures:
    wire: str
    rate: float  # new sessions a minute
    replicas: int
    shared_notes: bool  # the replicas read each other's fleet notes
    sessions: int
    first_calls_full: float  # share of first calls (after the first) reading it all
    overflows: int
    shared_keep_warm: int  # keep-warm calls on the shared tools+system entry
    keys: int  # distinct prompt_cache_key values sent

    @property
    def setup(self) -> str:
        if self.replicas == 1:
            return "1 gateway"
        return f"{self.replicas} replicas, " + ("notes shared" if self.shared_notes else "alone")

    def to_dict(self) -> dict[str, Any]:
        return {
            "wire": self.wire,
            "rate_per_minute": self.rate,
            "replicas": self.replicas,
            "shared_notes": self.shared_notes,
            "sessions": self.sessions,
            "first_calls_reading_the_shared_prefix": json_ratio(self.first_calls_full),
            "overflow_misses": self.overflows,
            "shared_keep_warm_calls": self.shared_keep_warm,
            "keys": self.keys,
        }


def sqlite_databases(folder: Path) -> NewDatabase:
    """A new SQLite file in `folder` for each run."""
    numbers = itertools.count()

    async def new_database() -> OpenStore:
        path = folder / f"fleet-{next(numbers)}.db"

        async def open_store() -> SqlEventStore:
            return store_at(path)

        return open_store

    return new_database


def postgres_databases(dsn: str) -> NewDatabase:
    """A new database on the PostgreSQL server the URL `dsn` names, for each run (dropped
    first if a run before left it); they are created from the URL's own database."""
    numbers = itertools.count()

    async def new_database() -> OpenStore:
        import psycopg  # the postgres extra; imported where it is needed

        name = f"stoker_fleet_bench_{next(numbers)}"
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{name}"')
        url = urlsplit(dsn)._replace(path=f"/{name}").geturl()

        async def open_store() -> SqlEventStore:
            return store_at(url)

        return open_store

    return new_database


def _registry() -> ToolRegistry:
    return ToolRegistry([Toolset(name="inspect", tools=TOOLS)])


@contextlib.asynccontextmanager
async def _replicas(
    count: int, open_store: OpenStore, *, model: str, clock: FrozenClock, engine: SimEngine
) -> AsyncIterator[tuple[list[Gateway], list[SimProvider]]]:
    providers: list[SimProvider] = []

    def factory(route: ProviderRoute) -> Provider:
        provider = SimProvider(engine=engine, clock=clock)  # one upstream for all
        providers.append(provider)
        return provider

    gateways = []
    try:
        for i in range(count):
            gateways.append(
                Gateway(
                    store=await open_store(),
                    defaults=SessionSettings(provider="sim", model=model, system=SYSTEM),
                    provider_factory=factory,
                    registry=_registry(),
                    clock=clock,
                    replica=f"replica{i}-{secrets.token_hex(4)}",
                )
            )
        for gw in gateways:
            await gw.start()
        yield gateways, providers
    finally:
        for gw in gateways:
            await gw.close()
            await gw.store.close()


async def shared_tokens(new_database: NewDatabase, model: str) -> int:
    """What a second session's first call reads on one gateway: the shared prefix as the
    cache counts it (one key, no overflow)."""
    clock = FrozenClock()
    engine = SimEngine(model=WorkloadModel())
    open_store = await new_database()
    async with _replicas(1, open_store, model=model, clock=clock, engine=engine) as (gws, _):
        gw = gws[0]
        records: list[CacheRecord] = []
        with observe_records(records.append):
            for n in range(2):
                sid = await gw.create_session(USER)
                await gw.send(USER, sid, JOB.format(n=n))
                await clock.pass_time(1.0)
    second = next(r for r in records if r.session_id != records[0].session_id)
    return second.usage.read


async def fleet_replica_run(
    new_database: NewDatabase,
    *,
    wire: str,
    rate: float,
    replicas: int,
    shared_notes: bool,
    sessions: int,
    shared: int,
    seed: int = 7,
    tail_minutes: float = 65.0,
) -> FleetReplicaFigures:
    """`sessions` fresh sessions at `rate` a minute, each on a random one of `replicas`,
    then `tail_minutes` without arrivals (keep-warm runs its course: past a 1-hour TTL)."""
    model = WIRES[wire]
    clock = FrozenClock()
    engine = SimEngine(model=WorkloadModel())
    rng = random.Random(seed)
    records: list[CacheRecord] = []
    open_store = await new_database()
    async with _replicas(replicas, open_store, model=model, clock=clock, engine=engine) as (
        gateways,
        providers,
    ):
        if not shared_notes:
            for gw in gateways:
                await gw.fleet_sync.stop()  # each replica decides from its own share
        with observe_records(records.append):
            for n in range(sessions):
                gw = rng.choice(gateways)
                sid = await gw.create_session(USER)
                await gw.send(USER, sid, JOB.format(n=n))
                await clock.pass_time(60.0 / rate)
            await clock.pass_time(minutes=tail_minutes)
        keys = {p.get("prompt_cache_key") for sim in providers for p in sim.requests}
    turns = [r for r in records if r.purpose == "turn"]
    firsts: dict[str, CacheRecord] = {}
    for r in turns:
        firsts.setdefault(r.session_id, r)
    info = model_info(model)
    interval = info.interval if info.regime == "L" else 0
    later = list(firsts.values())[1:]
    full = sum(1 for r in later if r.usage.read >= shared - interval)
    return FleetReplicaFigures(
        wire=wire,
        rate=rate,
        replicas=replicas,
        shared_notes=shared_notes,
        sessions=sessions,
        first_calls_full=full / len(later) if later else 1.0,
        overflows=sum(1 for r in records if r.explanation.verdict == "overflow"),
        shared_keep_warm=sum(
            1 for r in records if r.purpose != "turn" and SHARED_DETAIL in r.explanation.detail
        ),
        keys=len(keys - {None}),
    )


async def run_fleet_replica_bench(
    new_database: NewDatabase,
    *,
    replicas: int = 4,
    sessions: int = 200,
    slow_sessions: int = 16,
    rates: tuple[float, ...] = RATES,
) -> list[FleetReplicaFigures]:
    """Per wire and rate: one gateway, `replicas` sharing notes, `replicas` alone."""
    results = []
    for wire, model in WIRES.items():
        shared = await shared_tokens(new_database, model)
        for rate in (*rates, 1.0 / SLOW_MINUTES):
            count = sessions if rate >= 1.0 else slow_sessions
            for n, notes in ((1, True), (replicas, True), (replicas, False)):
                results.append(
                    await fleet_replica_run(
                        new_database,
                        wire=wire,
                        rate=rate,
                        replicas=n,
                        shared_notes=notes,
                        sessions=count,
                        shared=shared,
                    )
                )
    return results


def fleet_replica_table(results: list[FleetReplicaFigures]) -> Table:
    table = figures_table(
        "bench gateway: one agent's fresh sessions over replicas (sim, simulated time)",
        (
            "wire",
            "new/min",
            "setup",
            "sessions",
            "first calls read it all",
            "overflow misses",
            "shared keep-warm",
            "keys",
        ),
        labels={"wire", "setup"},
    )
    for f in results:
        table.add_row(
            f.wire,
            f"{f.rate:g}",
            f.setup,
            str(f.sessions),
            f"{f.first_calls_full:.1%}",
            str(f.overflows),
            str(f.shared_keep_warm),
            str(f.keys),
        )
    return table
