"""`stoker bench compaction`: a long tool-using session that would pass a small context
window many times over, run three ways on the simulator with one frozen clock.

- *idle-aware* (the default policy): compact at 80% of the window, or at 50% once the
  cache has gone cold over an idle gap (the next call rewrites the history then anyway);
- *fixed threshold*: compact at 80% only, whatever the cache holds;
- the same calls with *no cache*: every input token at the base price.

Every call counts: turns, the forks that write the summaries, and keep-warm requests.
The workload: turns of 0 to 3 sequential tool calls, 30 s apart, with a 3-hour pause
every 30 turns (the user is away), long enough that the time policy lets the cache go.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from stoker.agent.agent import Agent
from stoker.agent.compaction import CompactionPolicy
from stoker.agent.keepwarm import KeepWarm
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.bench.tables import figures_table
from stoker.cache.fleet import FleetWatch
from stoker.cache.keys import KeyShards
from stoker.cache.models import model_info
from stoker.cache.pricing import cost_usd
from stoker.cache.record import observe_records
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.events import HistoryCompacted, MemorySink
from stoker.wire.figures import json_ratio, json_usd
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage

PAUSE = 3 * 3600.0  # every 30 turns: the user is away for 3 hours


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    name: str
    turns: int
    compactions: int
    calls: int
    cost_usd: float
    no_cache_usd: float  # the same calls, every input token uncached
    written: int
    read: int
    largest_request: int  # input tokens of the largest call

    @property
    def vs_no_cache(self) -> float:
        return self.cost_usd / self.no_cache_usd if self.no_cache_usd else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionFigures:
    window: int
    aware: Variant
    fixed: Variant

    def to_dict(self) -> dict[str, object]:
        """The figures for scripts: each policy's `vs_no_cache` is its `cost_usd` over its
        own `no_cache_usd` (beside it); `aware_vs_fixed` is the idle-aware `cost_usd` over
        the fixed threshold's."""

        def one(v: Variant) -> dict[str, object]:
            return {
                "turns": v.turns,
                "compactions": v.compactions,
                "calls": v.calls,
                "cost_usd": json_usd(v.cost_usd),
                "no_cache_usd": json_usd(v.no_cache_usd),
                "vs_no_cache": json_ratio(v.vs_no_cache),
                "written": v.written,
                "read": v.read,
                "largest_request": v.largest_request,
            }

        return {
            "window": self.window,
            "idle_aware": one(self.aware),
            "fixed_threshold": one(self.fixed),
            "aware_vs_fixed": json_ratio(self.aware.cost_usd / self.fixed.cost_usd),
        }


def _uncached(record: CacheRecord) -> float:
    u = record.usage
    return cost_usd(Usage(uncached=u.input_total, output=u.output), model_info(record.model)) or 0.0


async def run_variant(name: str, policy: CompactionPolicy, *, turns: int) -> Variant:
    clock = FrozenClock()
    provider = SimProvider(
        engine=SimEngine(model=WorkloadModel()), clock=clock, keep_requests=False
    )
    agent = Agent(
        DEFAULT_MODEL,
        provider=provider,
        tools=TOOLS,
        system=SYSTEM,
        clock=clock,
        compaction=policy,
        key_shards=KeyShards(),
        fleet=FleetWatch(),
    )
    sink = MemorySink()
    session = agent.session(store=sink)
    keep_warm = KeepWarm(clock)
    keep_warm.watch(session)
    records: list[CacheRecord] = []
    with observe_records(records.append):
        for i in range(turns):
            await session.send(f"Task {i}: look at part {i % 8}, run {i % 4} steps")
            await keep_warm.idle(PAUSE if (i + 1) % 30 == 0 else 30)
    # Without a cache there is nothing to keep warm: the baseline is the turns and the
    # summaries (their calls are turns of the summarising fork), not the pings and seals.
    turn_calls = [r for r in records if r.purpose == "turn"]
    return Variant(
        name=name,
        turns=turns,
        compactions=sum(isinstance(e, HistoryCompacted) for e in sink.events),
        calls=len(records),
        cost_usd=sum(r.cost_usd or 0.0 for r in records),
        no_cache_usd=sum(_uncached(r) for r in turn_calls),
        written=sum(r.usage.written for r in records),
        read=sum(r.usage.read for r in records),
        largest_request=max(r.usage.input_total for r in records),
    )


async def run_compaction_bench(*, turns: int = 300, window: int = 24_000) -> CompactionFigures:
    aware = await run_variant(
        "idle-aware (80%, or 50% when cold)", CompactionPolicy(window=window), turns=turns
    )
    fixed = await run_variant(
        "fixed threshold (80%)",
        CompactionPolicy(window=window, idle_threshold=0.8),
        turns=turns,
    )
    return CompactionFigures(window=window, aware=aware, fixed=fixed)


NO_CACHE_NOTE = (
    'each row\'s "cost / no-cache" divides by its own no-cache cost: its turns and summaries '
    "with every input token uncached (no keep-warm: nothing to keep warm without a cache)"
)


def compaction_table(figures: CompactionFigures) -> Table:
    """The two policies side by side. Each ratio names its denominator: a row's "cost /
    no-cache" divides by that row's own no-cache cost (the policies make different
    calls), and the caption's comparison divides by the fixed threshold's cost."""
    table = figures_table(
        f"{figures.aware.turns}-turn session, {figures.window:,}-token context window",
        (
            "policy",
            "compactions",
            "calls",
            "largest request",
            "written",
            "read",
            "cost",
            "no-cache cost",
            "cost / no-cache",
        ),
        labels={"policy"},
        title_justify="center",
    )
    for v in (figures.aware, figures.fixed):
        table.add_row(
            v.name,
            str(v.compactions),
            str(v.calls),
            f"{v.largest_request:,}",
            f"{v.written:,}",
            f"{v.read:,}",
            f"${v.cost_usd:.4f}",
            f"${v.no_cache_usd:.4f}",
            f"{v.vs_no_cache:.3f}",
        )
    table.caption = (
        "idle-aware cost / fixed-threshold cost: "
        f"{figures.aware.cost_usd / figures.fixed.cost_usd:.3f}; {NO_CACHE_NOTE}"
    )
    return table
