"""`stoker bench cache --workload fleet`: one agent, many fresh sessions.

A cron job that opens a session per run, or a gateway serving many users of one agent,
sends the same tools and system prompt from every new session. Whether the first call
of each new session reads them is decided by the cache key on OpenAI (a key per session
starts each one cold; one key for all overflows to cold machines on a model that routes
by key, above about 15 requests a minute) and by nothing on Anthropic (the prefix is
the key). The bench runs `SESSIONS` fresh sessions of one agent arriving at 1, 10 and 60
a minute, each a short job (a tool call and an answer), on the simulator, and compares
three ways to key them:

- *per session*: a key per lineage (Stoker before content-addressed keys);
- *one key*: content-addressed, never sharded;
- *sharded*: content-addressed, sharded by the rate this process observes (the default).

For each it reports the share of first calls (after the first session's) that read the
whole shared prefix, the input cost against sending the same tokens with no cache, the
calls that overflowed, and how many keys were used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rich.table import Table

from stoker.agent.agent import Agent
from stoker.agent.keepwarm import KeepWarm
from stoker.agent.session import Session
from stoker.agent.starts import new_session_id, new_start
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel, input_units
from stoker.bench.tables import rows_table
from stoker.cache.fleet import FleetWatch
from stoker.cache.keys import KeyShards
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.record import observe_records
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.figures import json_ratio
from stoker.wire.record import CacheRecord

Mode = Literal["per session", "one key", "sharded"]
MODES: tuple[Mode, ...] = ("per session", "one key", "sharded")
WIRES = {  # the model each wire runs: Anthropic, OpenAI routing by itself, OpenAI by key
    "anthropic": DEFAULT_MODEL,
    "openai gpt-5.6 (N)": "gpt-5.6",
    "openai gpt-5 (L)": "gpt-5",
}
FLEET_LEGEND = (
    "(N): OpenAI regime N (gpt-5.6 and later), which routes requests by itself; the key "
    "only separates caches.\n"
    "(L): OpenAI regime L (before gpt-5.6): routed by the first tokens and the key, a route "
    "overflows to cold machines past about 15 requests a minute.\n"
    "(prefix): Anthropic takes no key; the prefix itself is the cache key."
)
ARRIVALS_LEGEND = (
    "time policy: keep-warm weighing each session alone (per session) or the arrivals of "
    "the whole fleet (fleet); keep-warm spend in base-input tokens."
)
RATES = (1, 10, 60)  # new sessions per minute
SESSIONS = 200
JOB = "Nightly maintenance run {n}: run 1 steps"  # a tool call, then an answer


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetFigures:
    wire: str
    rate: int
    mode: Mode
    sessions: int
    minutes: float
    first_calls_full: float  # share of first calls (after the first session) reading it all
    cost_ratio: float  # input cost / input cost with no cache
    overflows: int  # calls that overflowed to a cold machine
    keys: int  # distinct prompt_cache_key values sent

    def to_dict(self) -> dict[str, Any]:
        return {
            "wire": self.wire,
            "rate_per_minute": self.rate,
            "mode": self.mode,
            "sessions": self.sessions,
            "minutes": round(self.minutes, 1),
            "first_calls_reading_the_shared_prefix": json_ratio(self.first_calls_full),
            "cost_vs_no_cache": json_ratio(self.cost_ratio),
            "overflow_misses": self.overflows,
            "keys": self.keys,
        }


def _fleet_agent(model: str, clock: FrozenClock, **extra: Any) -> Agent:
    """An agent of the workload on a simulator of its own: one process, seeing only this
    run's sessions (its own rates and arrivals, on its own clock)."""
    provider = SimProvider(engine=SimEngine(model=WorkloadModel()), clock=clock)
    extra.setdefault("key_shards", KeyShards())
    return Agent(
        model,
        provider=provider,
        tools=TOOLS,
        system=SYSTEM,
        clock=clock,
        fleet=FleetWatch(),
        **extra,
    )


async def measure_shared(model: str) -> int:
    """The shared prefix's tokens on `model`, as the cache counts them: what a second
    session's first call reads when only its question differs (one key, no overflow)."""
    clock = FrozenClock()
    agent = _fleet_agent(model, clock)
    await agent.session().send("warm up")
    clock.advance(1)
    result = await agent.session().send("warm up again")
    return result.records[0].usage.read


def _new_session(agent: Agent, mode: Mode) -> Session:
    if mode != "per session":
        return agent.session()
    # Stoker before content-addressed keys: no slot, so the key is the lineage's own.
    start = new_start(
        prefix=agent.build_prefix(),
        config=agent.config_snapshot(),
        now=agent.clock.now(),
        session_id=new_session_id(),
    )
    return Session(start, agent=agent)


async def fleet_run(model: str, rate: int, mode: Mode, sessions: int, shared: int) -> FleetFigures:
    clock = FrozenClock()
    shards = KeyShards(max_shards=1) if mode == "one key" else KeyShards()
    agent = _fleet_agent(model, clock, key_shards=shards)
    provider = agent.provider
    assert isinstance(provider, SimProvider)
    records: list[CacheRecord] = []
    firsts: list[CacheRecord] = []
    start = clock.now()
    for n in range(sessions):
        clock.advance(start + n * 60.0 / rate - clock.now())
        session = _new_session(agent, mode)
        await session.send(JOB.format(n=n))
        records.extend(session.records)
        firsts.append(session.records[0])
    info = model_info(model)
    interval = info.interval if info.regime == "L" else 0
    later = firsts[1:]
    full = sum(1 for r in later if r.usage.read >= shared - interval)
    total_in = sum(r.usage.input_total for r in records)
    return FleetFigures(
        wire=next(w for w, m in WIRES.items() if m == model),
        rate=rate,
        mode=mode,
        sessions=sessions,
        minutes=(clock.now() - start) / 60.0,
        first_calls_full=full / len(later) if later else 1.0,
        cost_ratio=sum(input_units(r) for r in records) / total_in,
        overflows=sum(1 for r in records if r.explanation.verdict == "overflow"),
        keys=len({p.get("prompt_cache_key") for p in provider.requests}),
    )


async def run_fleet_bench(
    *, sessions: int = SESSIONS, rates: tuple[int, ...] = RATES
) -> list[FleetFigures]:
    results = []
    for model in WIRES.values():
        shared = await measure_shared(model)
        modes = MODES if model_info(model).provider == "openai" else ("sharded",)
        for rate in rates:
            for mode in modes:
                results.append(await fleet_run(model, rate, mode, sessions, shared))
    return results


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrivalFigures:
    """Anthropic sessions arriving slower than the 5-minute TTL, with keep-warm running."""

    interval_minutes: float
    fleet_aware: bool
    sessions: int
    first_calls_full: float
    cost_ratio: float  # input cost, keep-warm included / input cost with no cache
    keep_warm_calls: int
    keep_warm_units: float  # base-input tokens spent on keep-warm

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval_minutes": self.interval_minutes,
            "fleet_aware": self.fleet_aware,
            "sessions": self.sessions,
            "first_calls_reading_the_shared_prefix": json_ratio(self.first_calls_full),
            "cost_vs_no_cache": json_ratio(self.cost_ratio),
            "keep_warm_calls": self.keep_warm_calls,
            "keep_warm_units": round(self.keep_warm_units, 1),
        }


INTERVALS = (2.0, 8.0, 20.0)  # minutes between new sessions: under, over, well over the TTL
ARRIVING = 24  # sessions per interval (8 simulated hours at the slowest, within one day)


async def arrivals_run(
    interval: float, *, fleet_aware: bool, sessions: int, shared: int
) -> ArrivalFigures:
    """One-shot sessions of one agent arriving every `interval` minutes, each watched by
    the keep-warm scheduler, whose time policy weighs the fleet or each session alone."""
    clock = FrozenClock()
    policy = CachePolicy(keep_warm=TimePolicy(fleet=fleet_aware))
    agent = _fleet_agent(DEFAULT_MODEL, clock, cache_policy=policy)
    keep_warm = KeepWarm(clock)
    records: list[CacheRecord] = []
    firsts: list[CacheRecord] = []
    with observe_records(records.append):
        for n in range(sessions):
            session = agent.session()
            await session.send(JOB.format(n=n))
            firsts.append(session.records[0])
            keep_warm.watch(session)
            await keep_warm.idle(interval * 60.0)
    turns = [r for r in records if r.purpose == "turn"]
    warm = [r for r in records if r.purpose != "turn"]
    later = firsts[1:]
    return ArrivalFigures(
        interval_minutes=interval,
        fleet_aware=fleet_aware,
        sessions=sessions,
        first_calls_full=sum(1 for r in later if r.usage.read >= shared) / len(later),
        cost_ratio=sum(map(input_units, records)) / sum(r.usage.input_total for r in turns),
        keep_warm_calls=len(warm),
        keep_warm_units=sum(map(input_units, warm)),
    )


async def run_arrivals_bench(
    *, sessions: int = ARRIVING, intervals: tuple[float, ...] = INTERVALS
) -> list[ArrivalFigures]:
    shared = await measure_shared(DEFAULT_MODEL)
    return [
        await arrivals_run(interval, fleet_aware=aware, sessions=sessions, shared=shared)
        for interval in intervals
        for aware in (False, True)
    ]


def arrivals_table(results: list[ArrivalFigures]) -> Table:
    cells: dict[str, Callable[[ArrivalFigures], str]] = {
        "every (min)": lambda f: f"{f.interval_minutes:g}",
        "time policy": lambda f: "fleet" if f.fleet_aware else "per session",
        "first calls read it all": lambda f: f"{f.first_calls_full:.1%}",
        "cost vs no cache": lambda f: f"{f.cost_ratio:.3f}",
        "keep-warm calls": lambda f: str(f.keep_warm_calls),
        "keep-warm spend": lambda f: f"{f.keep_warm_units:,.0f}",
    }
    table = rows_table("bench cache: fleet, slow arrivals (Anthropic)", results, cells)
    table.caption, table.caption_justify = ARRIVALS_LEGEND, "left"
    return table


def fleet_table(results: list[FleetFigures]) -> Table:
    cells: dict[str, Callable[[FleetFigures], str]] = {
        "wire": lambda f: f.wire,
        "new/min": lambda f: str(f.rate),
        "keying": lambda f: f.mode if f.wire != "anthropic" else "(prefix)",
        "first calls read it all": lambda f: f"{f.first_calls_full:.1%}",
        "cost vs no cache": lambda f: f"{f.cost_ratio:.3f}",
        "overflow misses": lambda f: str(f.overflows),
        "keys": lambda f: str(f.keys),
    }
    table = rows_table("bench cache: fleet", results, cells, labels={"wire"})
    table.caption, table.caption_justify = FLEET_LEGEND, "left"
    return table
