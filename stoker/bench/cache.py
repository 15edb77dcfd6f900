"""`stoker bench cache`: whole sessions held to the ideal, on the simulator, with a frozen
clock that drives both the simulator and the keep-warm scheduler.

The ideal is every distinct prefix token written once at short-TTL prices: the first
time a block (after everything before it) is sent it has to be written, and never again.
For each phase and in total the bench reports what was written against that ideal, the
share of input read from the cache, the input cost against sending the same tokens with
no cache, what keep-warm spent (counted apart, and included in the cost), and every call
that read less than it could, with its explanation.

- *hard*: 8 tools, a 24-call sequential tool loop, a 6-minute idle gap, a fork, and a
  resume in a new process (a new agent, provider and store object; the simulated
  provider's cache is the one thing that outlives the process, as a real one's does).
- *library-defaults*: the hard workload with every agent at its defaults and only the
  clock moving through the gap: what a library user who writes nothing about keep-warm
  gets.
- *typed*: one session asks for three different output types: the schemas travel in the
  turns' messages, so nothing is written twice.
- *extended*: background memory and skill reviews, 3 parallel sub-agents, a 40-minute
  gap, a rebuild from the store (what a gateway does with an evicted agent), `/model`
  there and back, a toolkit connecting mid-session, and a 3-hour gap.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.table import Table

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.integrations import Integrations
from stoker.agent.keepwarm import KeepWarm
from stoker.agent.review import ReviewConfig
from stoker.agent.session import Session
from stoker.bench.tables import figures_table

# The workloads' agent, importable from here as before (`bench proxy`, `bench fuzz`, ...).
from stoker.bench.workload import SYSTEM as SYSTEM
from stoker.bench.workload import TOOLS as TOOLS
from stoker.bench.workload import WorkloadModel as WorkloadModel
from stoker.bench.workload import lookup_tool
from stoker.cache.accounting.anthropic import prefix_blocks
from stoker.cache.fleet import FleetWatch
from stoker.cache.keys import KeyShards
from stoker.cache.models import model_info
from stoker.cache.record import observe_records
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.integrations import PluginToolkit, ToolkitCache, ToolkitRegistry
from stoker.memory import MemoryStore, SkillStore, memory_toolset, skills_toolset
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.tools import ToolRegistry, Toolset
from stoker.wire.figures import json_ratio
from stoker.wire.record import CacheRecord

OTHER_MODEL = "claude-sonnet-4-5"  # `/model` there and back: same price, another namespace
_READ_ALL = frozenset({"hit", "first", "kept_warm"})


@dataclass(slots=True, kw_only=True)
class Phase:
    """One step of a workload and every call made during it."""

    name: str
    records: list[CacheRecord] = field(default_factory=list)
    ideal: int = 0  # distinct prefix tokens first sent in this phase

    def turn_calls(self) -> list[CacheRecord]:
        return [r for r in self.records if r.purpose == "turn"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseFigures:
    name: str
    calls: int
    keep_warm_calls: int
    written: int
    ideal: int
    read_share: float
    cost_ratio: float  # input cost with keep-warm / input cost with no cache
    floor_ratio: float  # the same, if every distinct prefix token were written once and read after
    keep_warm_units: float  # base-input tokens spent on keep-warm
    rewrite_units: float  # what rewriting this phase's largest prefix would cost
    misses: tuple[str, ...]  # every call that read less than it could, and why
    undeclared: int  # of those, the ones no rebase declared
    uncached: int = 0  # input neither read nor written (an implicit cache stores it free)

    @property
    def writes_vs_ideal(self) -> float:
        return self.written / self.ideal if self.ideal else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadFigures:
    name: str
    phases: tuple[PhaseFigures, ...]
    total: PhaseFigures
    notes: tuple[str, ...] = ()  # what a provider's run adds (its storage spend, ...)
    records: tuple[CacheRecord, ...] = ()  # every call, for what foresight would have paid

    def to_dict(self) -> dict[str, Any]:
        def one(p: PhaseFigures) -> dict[str, Any]:
            return {
                "phase": p.name,
                "calls": p.calls,
                "keep_warm_calls": p.keep_warm_calls,
                "written": p.written,
                "ideal": p.ideal,
                "writes_vs_ideal": json_ratio(p.writes_vs_ideal),
                "read_share": json_ratio(p.read_share),
                "cost_vs_no_cache": json_ratio(p.cost_ratio),
                "floor_vs_no_cache": json_ratio(p.floor_ratio),
                "keep_warm_units": round(p.keep_warm_units, 1),
                "one_rewrite_units": round(p.rewrite_units, 1),
                "misses": list(p.misses),
                "undeclared_misses": p.undeclared,
            }

        return {
            "workload": self.name,
            "phases": [one(p) for p in self.phases],
            "total": one(self.total),
            **({"notes": list(self.notes)} if self.notes else {}),
        }


def input_units(record: CacheRecord) -> float:
    """A call's input in base-input tokens, with the storage an explicit cache's
    lifecycle call bought (`storage_token_hours`, Gemini's) at its price."""
    info = model_info(record.model)
    u = record.usage
    storage = 0.0
    if record.storage_token_hours and info.storage is not None and info.input:
        storage = record.storage_token_hours * info.storage / info.input
    return (
        u.uncached
        + info.write_5m * u.written_5m
        + info.write_1h * u.written_1h
        + info.read * u.read
        + storage
    )


def _figures(name: str, phases: list[Phase]) -> PhaseFigures:
    records = [r for p in phases for r in p.records]
    turns = [r for r in records if r.purpose == "turn"]
    warm = [r for r in records if r.purpose != "turn"]
    total_in = sum(r.usage.input_total for r in turns)
    return PhaseFigures(
        name=name,
        calls=len(turns),
        keep_warm_calls=len(warm),
        written=sum(r.usage.written for r in records),
        ideal=sum(p.ideal for p in phases),
        read_share=sum(r.usage.read for r in turns) / total_in if total_in else 0.0,
        cost_ratio=sum(input_units(r) for r in records) / total_in if total_in else 0.0,
        floor_ratio=_floor(turns, sum(p.ideal for p in phases)) / total_in if total_in else 0.0,
        keep_warm_units=sum(input_units(r) for r in warm),
        rewrite_units=max(
            (model_info(r.model).write_5m * (r.usage.read + r.usage.written) for r in records),
            default=0.0,
        ),
        misses=tuple(
            f"{r.session_id.rsplit('.', 1)[-1][:18]} #{r.seq}: {r.explanation}"
            for r in records
            if r.explanation.verdict not in _READ_ALL
        ),
        undeclared=sum(1 for r in records if r.explanation.verdict not in _READ_ALL | {"declared"}),
        uncached=sum(r.usage.uncached for r in records),
    )


def _floor(turns: list[CacheRecord], ideal: int) -> float:
    """The ideal's input cost: the distinct prefix tokens written once at short-TTL prices,
    every other input token read (prices of the session's model)."""
    if not turns:
        return 0.0
    info = model_info(turns[0].model)
    total = sum(r.usage.input_total for r in turns)
    return info.write_5m * ideal + info.read * (total - ideal)


# The distinct prefix units of a request as (cache key, tokens), or None for a keep-warm
# request (it adds nothing that must be written): how the ideal is counted on a provider.
Units = Callable[[dict[str, Any]], list[tuple[str, int]] | None]


def anthropic_units(payload: dict[str, Any]) -> list[tuple[str, int]] | None:
    """Anthropic's blocks; a `max_tokens: 0` request is a keep-warm."""
    return None if payload.get("max_tokens") == 0 else prefix_blocks(payload)


class Run:
    """The shared parts of a workload: one clock, one simulated provider's cache, the
    phases and the distinct prefix blocks seen so far. `model` and `dialect` choose the
    simulated provider (the model's own by default); `units` counts the ideal in that
    provider's prefix units."""

    def __init__(
        self,
        home: Path,
        *,
        model: str = DEFAULT_MODEL,
        dialect: str | None = None,
        units: Units = anthropic_units,
    ) -> None:
        self.model = model
        self.dialect = dialect
        self.units = units
        self.clock = FrozenClock()
        self.engine = SimEngine(model=WorkloadModel())
        self.home = home
        self.phases: list[Phase] = []
        self.keep_warm = KeepWarm(self.clock)
        # What "the process" has seen of other sessions: this run's own, on its own clock.
        self.key_shards = KeyShards()
        self.fleet = FleetWatch()
        self._seen: set[str] = set()
        self._providers: list[SimProvider] = []
        self._counted: dict[int, int] = {}  # requests of each provider already counted

    def provider(self) -> SimProvider:
        """A new provider object on the same simulated cache (a new process's client)."""
        provider = SimProvider(engine=self.engine, clock=self.clock, dialect=self.dialect)
        self._providers.append(provider)
        return provider

    def store(self) -> SQLiteStore:
        return SQLiteStore(self.home / "bench.db")

    @contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        phase = Phase(name=name)
        with observe_records(phase.records.append):
            yield phase
        for i, provider in enumerate(self._providers):
            new, self._counted[i] = (
                provider.requests[self._counted.get(i, 0) :],
                len(provider.requests),
            )
            for payload in new:
                units = self.units(payload)
                if units is None:
                    continue  # keep-warm requests add nothing that must be written
                for key, tokens in units:
                    if key not in self._seen:
                        self._seen.add(key)
                        phase.ideal += tokens
        self.phases.append(phase)

    async def gap(self, name: str, seconds: float, *, clock_only: bool = False) -> None:
        """`seconds` of idle time: through the run's keep-warm scheduler (as `stoker serve`
        and `stoker chat` run theirs), or (`clock_only`) by moving the clock alone, so only
        what the agents keep warm by default acts."""
        with self.phase(name):
            if clock_only:
                await self.clock.pass_time(seconds)
            else:
                await self.keep_warm.idle(seconds)

    async def turn(self, name: str, session: Session, text: str, *, output: Any = None) -> None:
        with self.phase(name):
            await session.send(text, output=output)
            await session.drain()

    def figures(self, name: str) -> WorkloadFigures:
        return WorkloadFigures(
            name=name,
            phases=tuple(_figures(p.name, [p]) for p in self.phases),
            total=_figures("total", self.phases),
            records=tuple(r for p in self.phases for r in p.records),
        )


def _agent(run: Run, **changes: Any) -> Agent:
    """The workloads' agent; its own background keep-warm is off unless asked for, as the
    run drives a scheduler of its own (the gateway's and `stoker chat`'s way)."""
    changes.setdefault("keep_warm", False)
    return Agent(
        run.model,
        provider=run.provider(),
        tools=changes.pop("tools", TOOLS),
        system=SYSTEM,
        clock=run.clock,
        key_shards=run.key_shards,
        fleet=run.fleet,
        **changes,
    )


async def hard(
    home: Path,
    *,
    model: str = DEFAULT_MODEL,
    dialect: str | None = None,
    units: Units = anthropic_units,
) -> WorkloadFigures:
    """8 tools, a 24-call loop, a 6-minute gap, a fork, a resume in a new process (on
    `model`, through `dialect`: `stoker.bench.providers` runs it on every provider)."""
    run = Run(home, model=model, dialect=dialect, units=units)
    async with run.store() as store:
        session = await _agent(run).open(store, "hard")
        run.keep_warm.watch(session)
        await run.turn("24-call tool loop", session, "Audit the service: run 24 steps")
        await run.turn("follow-up", session, "Summarise what you found")
        await run.gap("6-minute gap", 360)
        await run.turn("after the gap", session, "What should we fix first?")
        with run.phase("fork"):
            await session.fork(role="review").send("Anything worth remembering?")
    async with run.store() as store:  # a new process: new agent, provider and store
        resumed = await _agent(run).open(store, "hard", create=False)
        run.keep_warm.watch(resumed)
        await run.turn("resume in a new process", resumed, "Fix the first one: run 3 steps")
    return run.figures("hard")


async def library_defaults(home: Path) -> WorkloadFigures:
    """The hard workload as a library user writes it: agents left at their defaults, and
    the idle gap only the clock moving (nothing here runs a keep-warm scheduler)."""
    run = Run(home)
    async with run.store() as store, _agent(run, keep_warm=True) as agent:
        session = await agent.open(store, "hard")
        await run.turn("24-call tool loop", session, "Audit the service: run 24 steps")
        await run.turn("follow-up", session, "Summarise what you found")
        await run.gap("6-minute gap", 360, clock_only=True)
        await run.turn("after the gap", session, "What should we fix first?")
        with run.phase("fork"):
            await session.fork(role="review").send("Anything worth remembering?")
    async with run.store() as store, _agent(run, keep_warm=True) as agent:  # a new process
        resumed = await agent.open(store, "hard", create=False)
        await run.turn("resume in a new process", resumed, "Fix the first one: run 3 steps")
    return run.figures("library-defaults")


class Finding(BaseModel):
    """One problem the audit found."""

    file: str
    severity: int
    summary: str


class Plan(BaseModel):
    """What to do about the findings, in order."""

    steps: list[str]
    hours: float


class Verdict(BaseModel):
    """Whether the service can ship."""

    ship: bool
    reason: str


async def typed(home: Path) -> WorkloadFigures:
    """One session asks for three different output types, one turn each: the schemas go
    in the turns' messages, so the prefix (and what it cached) never moves."""
    run = Run(home)
    async with run.store() as store:
        session = await _agent(run).open(store, "typed")
        await run.turn("plain text", session, "Audit the service: run 6 steps")
        await run.turn("output: Finding", session, "The worst finding?", output=Finding)
        await run.turn("output: Plan", session, "The plan to fix it?", output=Plan)
        await run.turn("output: Verdict", session, "Can we ship?", output=Verdict)
    return run.figures("typed")


async def extended(home: Path) -> WorkloadFigures:
    """Reviews, 3 parallel sub-agents, gaps of 40 minutes and 3 hours, a rebuild,
    `/model` there and back, a toolkit connecting mid-session."""
    run = Run(home)
    memory = MemoryStore(home / "memory", clock=run.clock)
    skills = SkillStore(home / "skills", clock=run.clock)
    registry = ToolRegistry(
        [
            Toolset(name="inspect", tools=TOOLS),
            memory_toolset(memory),
            skills_toolset(skills),
            Toolset(name="delegation", tools=[delegate_tool()]),
        ]
    )
    toolkits = ToolkitRegistry([PluginToolkit("tickets", [lookup_tool(20)])])
    integrations = Integrations(registry=toolkits, cache=ToolkitCache(clock=run.clock))

    def agent() -> Agent:
        return _agent(
            run,
            tools=(),
            registry=registry,
            integrations=integrations,
            review=ReviewConfig(memory_every=1, skills_every=6),
        )

    async with run.store() as store:
        session = await agent().open(store, "extended")
        run.keep_warm.watch(session)
        await run.turn("tool loop + reviews", session, "Audit the service: run 12 steps")
        await run.turn("3 parallel sub-agents", session, "Please delegate the checks")
        await run.gap("40-minute gap", 40 * 60)
        await run.turn("after 40 minutes", session, "Where do we stand?")
    async with run.store() as store:  # the gateway evicted the agent: rebuilt from the store
        session = await agent().open(store, "extended", create=False)
        run.keep_warm.watch(session)
        await run.turn("rebuild from the store", session, "Continue")
        with run.phase("/model there and back"):
            await session.rebase(reason=f"/model {OTHER_MODEL}", model=OTHER_MODEL)
            await session.send("A second opinion, please")
            await session.rebase(reason=f"/model {DEFAULT_MODEL}", model=DEFAULT_MODEL)
            await session.send("Back to the usual model")
        toolkits.register(PluginToolkit("deploys", [lookup_tool(21)]))
        await run.turn("toolkit connects", session, "What can you reach now?")
        await run.gap("3-hour gap", 3 * 3600)
        await run.turn("after 3 hours", session, "Good morning: where were we?")
    return run.figures("extended")


WORKLOADS: dict[str, Callable[[Path], Awaitable[WorkloadFigures]]] = {
    "hard": hard,
    "library-defaults": library_defaults,
    "typed": typed,
    "extended": extended,
}


async def run_cache_bench(
    names: tuple[str, ...] = ("hard", "library-defaults", "typed", "extended"),
) -> list[WorkloadFigures]:
    results = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"stoker-bench-{name}-") as tmp:
            results.append(await WORKLOADS[name](Path(tmp)))
    return results


def cache_table(figures: WorkloadFigures) -> Table:
    columns = (
        "phase",
        "calls",
        "keep-warm",
        "written",
        "ideal",
        "writes/ideal",
        "read share",
        "cost vs no cache",
        "floor",
        "keep-warm spend",
    )
    table = figures_table(f"bench cache: {figures.name}", columns, labels={"phase"})
    for p in (*figures.phases, figures.total):
        table.add_row(
            p.name,
            str(p.calls),
            str(p.keep_warm_calls),
            f"{p.written:,}",
            f"{p.ideal:,}",
            f"{p.writes_vs_ideal:.2f}x" if p.ideal else "-",
            f"{p.read_share:.1%}",
            f"{p.cost_ratio:.3f}",
            f"{p.floor_ratio:.3f}",
            f"{p.keep_warm_units:,.0f}",
        )
    if figures.notes:
        table.caption = "\n".join(figures.notes)
        table.caption_justify = "left"
    return table
