"""`stoker bench cache --workload fleet`, Gemini's part: what a fleet's explicit caches
store, one per session against one per agent.

On Gemini a session that does not count on the implicit cache stores its tools and system
prompt in an explicit cache before its first call, and storage is billed per token-hour.
The bench runs `SESSIONS` fresh sessions of one agent on the simulated Gemini 2.5 Flash
(`implicit_trust=0`: only guaranteed discounts count), arriving every 2, 10 and 30
minutes, each a short job, and closes the agent at the end (what a cache still holds is
deleted and its storage given back). *Per session*: each session sees only itself (a fleet
of its own), so each makes a cache; *per agent*: one fleet, one cache its sessions share,
extended while their arrivals pay for it (`stoker.cache.fleet_cache`). Storage is what the
simulated provider billed, in token-hours, in all and per session; the bench checks it
against the records' own `storage_token_hours`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rich.table import Table

from stoker.agent.agent import Agent
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.bench.tables import rows_table
from stoker.cache.fleet import FleetWatch
from stoker.cache.planner import CachePolicy
from stoker.cache.record import observe_records
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.record import CacheRecord

MODEL = "gemini-2.5-flash"
Sharing = Literal["per session", "per agent"]
EVERY = (2.0, 10.0, 30.0)  # minutes between new sessions: under and over the break-even
SESSIONS = 24
JOB = "Nightly maintenance run {n}: run 1 steps"  # a tool call, then an answer
LEGEND = (
    "Gemini 2.5 Flash, implicit_trust=0: the tools and system prompt in an explicit cache. "
    "per session: each session makes its own; per agent: one the fleet shares, extended "
    "while arrivals pay for it (storage 3.3x input per token-hour against a 1.0x creation: "
    "arrivals at least every 18 min). Storage as the simulated provider billed it."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageFigures:
    every: float  # minutes between new sessions
    sharing: Sharing
    sessions: int
    caches: int  # explicit caches created
    extensions: int
    token_hours: float  # storage billed, all caches
    first_reads: float  # share of first calls that read the cache of the tools and system

    @property
    def per_session(self) -> float:
        return self.token_hours / self.sessions

    def to_dict(self) -> dict[str, Any]:
        return {
            "every_minutes": self.every,
            "sharing": self.sharing,
            "sessions": self.sessions,
            "caches_created": self.caches,
            "extensions": self.extensions,
            "storage_token_hours": round(self.token_hours, 1),
            "storage_token_hours_per_session": round(self.per_session, 1),
            "first_calls_reading_the_cache": round(self.first_reads, 4),
        }


def _agent(provider: SimProvider, clock: FrozenClock, fleet: FleetWatch) -> Agent:
    return Agent(
        MODEL,
        provider=provider,
        tools=TOOLS,
        system=SYSTEM,
        clock=clock,
        cache_policy=CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0)),
        keep_warm=False,
        fleet=fleet,
    )


async def storage_run(every: float, sharing: Sharing, *, sessions: int) -> StorageFigures:
    clock = FrozenClock()
    engine = SimEngine(model=WorkloadModel())  # one account: every agent's caches in it
    provider = SimProvider(engine=engine, clock=clock)
    shared = _agent(provider, clock, FleetWatch())
    agents: list[Agent] = []
    kept: list[object] = []  # an agent deletes at close what its live sessions hold
    records: list[CacheRecord] = []
    with observe_records(records.append):
        for n in range(sessions):
            if n:
                clock.advance(every * 60.0)
            agent = shared
            if sharing == "per session":  # a provider of its own: closing it closes no other
                agent = _agent(SimProvider(engine=engine, clock=clock), clock, FleetWatch())
            if not any(a is agent for a in agents):  # (agents compare by their fields)
                agents.append(agent)
            session = agent.session()
            await session.send(JOB.format(n=n))
            kept.append(session)
        for agent in agents:
            await agent.aclose()
    billed = provider.engine.google.storage_billed(provider.workspace) / 3600.0
    recorded = sum(r.storage_token_hours or 0.0 for r in records)
    if abs(billed - recorded) > 1e-6 * max(billed, 1.0):
        raise AssertionError(
            f"{sharing}, every {every:g} min: records say {recorded:.1f} token-hours, "
            f"the provider billed {billed:.1f}"
        )
    firsts = [r for r in records if r.purpose == "turn" and r.seq in (0, 1)]
    firsts = [r for r in firsts if r.seq == 0 or r.session_id in _made(records)]
    return StorageFigures(
        every=every,
        sharing=sharing,
        sessions=sessions,
        caches=sum(1 for r in records if r.purpose == "cache_create"),
        extensions=sum(1 for r in records if r.purpose == "cache_extend"),
        token_hours=billed,
        first_reads=sum(1 for r in firsts if r.cache_read) / len(firsts) if firsts else 0.0,
    )


def _made(records: list[CacheRecord]) -> set[str]:
    """Sessions whose first record is a cache's creation (their first call is record 1)."""
    return {r.session_id for r in records if r.purpose == "cache_create" and r.seq == 0}


async def run_storage_bench(
    *, sessions: int = SESSIONS, every: tuple[float, ...] = EVERY
) -> list[StorageFigures]:
    return [
        await storage_run(minutes, sharing, sessions=sessions)
        for minutes in every
        for sharing in ("per session", "per agent")
    ]


def storage_table(results: list[StorageFigures]) -> Table:
    cells: dict[str, Callable[[StorageFigures], str]] = {
        "every (min)": lambda f: f"{f.every:g}",
        "cache": lambda f: f.sharing,
        "sessions": lambda f: str(f.sessions),
        "caches made": lambda f: str(f.caches),
        "extended": lambda f: str(f.extensions),
        "storage token-h": lambda f: f"{f.token_hours:,.0f}",
        "per session": lambda f: f"{f.per_session:,.0f}",
        "first calls read it": lambda f: f"{f.first_reads:.0%}",
    }
    table = rows_table("bench cache: fleet, Gemini explicit caches", results, cells)
    table.caption, table.caption_justify = LEGEND, "left"
    return table
