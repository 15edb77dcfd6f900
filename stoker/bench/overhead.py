"""Framework overhead per turn, with the model costing nothing.

A turn is timed end to end and the time spent inside the simulator's engine (the stand-in
for the provider: its cache accounting and its model) is subtracted, so what remains is
Stoker's own work: planning breakpoints, building and rendering the request, parsing the
response, fingerprints, the record and its explanation, events. It should stay flat as
history grows, because only new messages are rendered and fingerprinted.

The simulator in process reads the render memo's own containers, which it never changes;
a real provider gets a copy of them, so that it cannot change the prefix. That copy is
timed on its own, on the payload of the first turn, and reported beside the turn.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from stoker.agent.agent import Agent
from stoker.bench.tables import figures_table
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim.engine import SimEngine, SimResult
from stoker.providers.sim.provider import SimProvider
from stoker.wire.blocks import TextBlock
from stoker.wire.dialects._memo import detached
from stoker.wire.messages import AssistantMessage, Message, UserMessage

HISTORY_SIZES = (10, 100, 1000)


@dataclass(slots=True, kw_only=True)
class _TimedEngine(SimEngine):
    spent_ns: int = 0
    last: dict[str, Any] = field(default_factory=dict)

    def handle(self, dialect: str, payload: dict[str, Any], **options: Any) -> SimResult:
        self.last = payload
        start = time.perf_counter_ns()
        try:
            return SimEngine.handle(self, dialect, payload, **options)
        finally:
            self.spent_ns += time.perf_counter_ns() - start


@dataclass(frozen=True, slots=True, kw_only=True)
class OverheadRow:
    history: int
    turns: int
    mean_us: float
    median_us: float
    p95_us: float
    copy_us: float  # what a real provider's payload copy adds to a turn (median)


async def _measure(history: int, turns: int) -> OverheadRow:
    engine = _TimedEngine()
    agent = Agent(provider=SimProvider(engine=engine, keep_requests=False), model=DEFAULT_MODEL)
    seeded: list[Message] = []
    for i in range(history // 2):  # history without provider calls
        seeded.append(UserMessage(content=(TextBlock(text=f"question {i}"),)))
        seeded.append(AssistantMessage(content=(TextBlock(text=f"answer {i}"),)))
    session = agent.session(history=seeded)
    await session.send("warm up")
    copies = []
    for _ in range(25):
        start = time.perf_counter_ns()
        detached(engine.last)
        copies.append((time.perf_counter_ns() - start) / 1000)
    samples: list[float] = []
    for i in range(turns):
        engine.spent_ns = 0
        start = time.perf_counter_ns()
        await session.send(f"turn {i}")
        samples.append((time.perf_counter_ns() - start - engine.spent_ns) / 1000)
    samples.sort()
    return OverheadRow(
        history=history,
        turns=turns,
        mean_us=statistics.fmean(samples),
        median_us=statistics.median(samples),
        p95_us=samples[int(len(samples) * 0.95) - 1],
        copy_us=statistics.median(copies),
    )


def run_overhead(*, turns: int = 200, sizes: tuple[int, ...] = HISTORY_SIZES) -> list[OverheadRow]:
    """Measure each history size in turn (each turn appends two messages to it)."""
    return [asyncio.run(_measure(size, turns)) for size in sizes]


def overhead_table(rows: list[OverheadRow]) -> Table:
    columns = ("history (messages)", "turns", "mean µs", "median µs", "p95 µs", "+ copy µs")
    table = figures_table("framework overhead per turn (sim model at 0 ms)", columns)
    for r in rows:
        table.add_row(
            str(r.history),
            str(r.turns),
            f"{r.mean_us:.0f}",
            f"{r.median_us:.0f}",
            f"{r.p95_us:.0f}",
            f"{r.copy_us:.0f}",
        )
    return table
