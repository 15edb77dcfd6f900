"""First-turn latency with a warm vs a cold toolkit cache.

A toolkit whose tool list takes 200 ms to fetch (a simulated slow server) is registered
with a session's agent. Cold: each session starts with an empty shared cache, so its
first turn fetches the list. Warm: the shared cache already holds it (another session
fetched it), so session creation prewarms from it and the first turn fetches nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

from rich.table import Table

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.integrations import Integrations
from stoker.bench.tables import figures_table
from stoker.config import DEFAULT_MODEL
from stoker.integrations import (
    IntegrationContext,
    PluginToolkit,
    ToolkitCache,
    ToolkitRegistry,
    ToolSpec,
)
from stoker.providers.sim.provider import SimProvider
from stoker.tools import tool


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query


class SlowToolkit(PluginToolkit):
    """A plugin toolkit whose tool list arrives after `delay` seconds, like a slow server."""

    def __init__(self, delay: float) -> None:
        super().__init__("slow", [lookup])
        self.delay = delay

    async def list_tools(self, context: IntegrationContext) -> tuple[ToolSpec, ...]:
        await asyncio.sleep(self.delay)
        return await super().list_tools(context)


@dataclass(frozen=True, slots=True, kw_only=True)
class FirstTurnRow:
    cache: str
    runs: int
    median_ms: float
    p90_ms: float
    fetches: int


async def _first_turn(cache: ToolkitCache, toolkit: SlowToolkit) -> float:
    agent = Agent(
        provider=SimProvider(keep_requests=False),
        model=DEFAULT_MODEL,
        tools=[delegate_tool()],
        integrations=Integrations(registry=ToolkitRegistry([toolkit]), cache=cache),
    )
    start = time.perf_counter()
    session = agent.session()
    await session.send("hello")
    return (time.perf_counter() - start) * 1000


async def run_firstturn(*, runs: int = 10, delay: float = 0.2) -> list[FirstTurnRow]:
    toolkit = SlowToolkit(delay)
    rows = []
    cold_fetches = 0
    cold = []
    for _ in range(runs):
        cache = ToolkitCache()
        cold.append(await _first_turn(cache, toolkit))
        cold_fetches += cache.fetch_count("slow")
    warm_cache = ToolkitCache()
    await warm_cache.get(toolkit, IntegrationContext())
    before = warm_cache.fetch_count("slow")
    warm = [await _first_turn(warm_cache, toolkit) for _ in range(runs)]
    warm_fetches = warm_cache.fetch_count("slow") - before
    for name, samples, fetches in (("cold", cold, cold_fetches), ("warm", warm, warm_fetches)):
        ordered = sorted(samples)
        rows.append(
            FirstTurnRow(
                cache=name,
                runs=runs,
                median_ms=statistics.median(ordered),
                p90_ms=ordered[max(0, int(len(ordered) * 0.9) - 1)],
                fetches=fetches,
            )
        )
    return rows


def firstturn_table(rows: list[FirstTurnRow]) -> Table:
    cold, warm = rows[0], rows[1]
    table = figures_table(
        f"first-turn latency, toolkit fetch 200 ms (cold / warm = "
        f"{cold.median_ms / warm.median_ms:.0f}x)",
        ("toolkit cache", "sessions", "median ms", "p90 ms", "toolkit fetches"),
    )
    for r in rows:
        table.add_row(r.cache, str(r.runs), f"{r.median_ms:.1f}", f"{r.p90_ms:.1f}", str(r.fetches))
    return table
