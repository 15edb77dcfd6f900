"""Time to resume stored sessions of 100, 1,000 and 10,000 events.

Each session is written in bulk with the shape of a real tool-using conversation (per
turn: user message, tool call, cache record, tool results, answer, cache record); each
measurement opens a fresh store object (a new process would) and calls
`agent.open`, which reads the header, the messages and the used-tools index,
reconciles, and rebuilds the planner state.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from stoker.agent.agent import Agent
from stoker.bench.tables import figures_table
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore
from stoker.tools import tool
from stoker.wire.blocks import TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.events import CacheRecorded, Event, MessageAppended, SessionCreated
from stoker.wire.fingerprint import SlotFingerprints
from stoker.wire.messages import AssistantMessage, Message, UserMessage, user_text
from stoker.wire.record import CacheRecord
from stoker.wire.request import Breakpoint
from stoker.wire.usage import Usage

SIZES = (100, 1_000, 10_000)


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeRow:
    backend: str
    events: int
    messages: int
    median_ms: float
    best_ms: float


def _record(sid: str, seq: int, count: int) -> CacheRecord:
    return CacheRecord(
        session_id=sid,
        seq=seq,
        role="main",
        provider="sim",
        model=DEFAULT_MODEL,
        started_at=float(seq),
        fingerprints=SlotFingerprints(
            params="p",
            tools=("t",),
            system="s",
            history="h",
            message_count=count,
            new_from=0,
            new_messages=(),
        ),
        breakpoints=(Breakpoint(), Breakpoint(message=count - 1, block=0)),
        usage=Usage(read=2000, written_5m=50),
        cost_usd=0.001,
    )


def session_events(agent: Agent, sid: str, n_events: int) -> list[Event]:
    events: list[Event] = [
        SessionCreated(
            session_id=sid,
            prefix=agent.build_prefix(),
            config={**agent.config_snapshot(), "root_id": sid},
        )
    ]
    messages: list[Message] = []
    turn = 0
    while len(events) < n_events:
        call = ToolUseBlock(id=f"toolu_{turn}", name="lookup", input_json=f'{{"query": "q{turn}"}}')
        step: list[Message | None] = [
            user_text(f"question {turn} " * 8),
            AssistantMessage(
                content=(TextBlock(text="Let me look."), call), stop_reason="tool_use"
            ),
            None,
            UserMessage(
                content=(ToolResultBlock(tool_use_id=call.id, content=f"result {turn} " * 20),)
            ),
            AssistantMessage(content=(TextBlock(text=f"answer {turn} " * 15),)),
            None,
        ]
        for m in step:
            if len(events) >= n_events:
                break
            if m is None:
                events.append(
                    CacheRecorded(session_id=sid, record=_record(sid, turn, len(messages)))
                )
            else:
                events.append(MessageAppended(session_id=sid, index=len(messages), message=m))
                messages.append(m)
        turn += 1
    if isinstance(messages[-1], AssistantMessage) and messages[-1].tool_calls:
        events.append(
            MessageAppended(session_id=sid, index=len(messages), message=user_text("stop"))
        )
    return events


async def _measure(backend: str, opener: Callable[[], SqlEventStore], runs: int) -> list[ResumeRow]:
    agent = Agent(provider=SimProvider(), model=DEFAULT_MODEL, tools=[lookup])
    rows = []
    for size in SIZES:
        sid = f"bench-{size}-{uuid.uuid4().hex[:8]}"
        writer = opener()
        await writer.emit_many(session_events(agent, sid, size))
        await writer.close()
        samples = []
        messages = 0
        for _ in range(runs):
            store = opener()
            start = time.perf_counter()
            session = await agent.open(store, sid, create=False)
            samples.append((time.perf_counter() - start) * 1000)
            messages = len(session.history)
            await store.close()
        rows.append(
            ResumeRow(
                backend=backend,
                events=size,
                messages=messages,
                median_ms=statistics.median(samples),
                best_ms=min(samples),
            )
        )
    return rows


async def run_resume(*, runs: int = 5, postgres: str | None = None) -> list[ResumeRow]:
    with tempfile.TemporaryDirectory(prefix="stoker-bench-") as tmp:
        rows = await _measure("sqlite", lambda: SQLiteStore(Path(tmp) / "bench.db"), runs)
    if postgres:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        rows += await _measure("postgresql", lambda: PostgresStore(postgres, schema=schema), runs)
        cleanup = PostgresStore(postgres, schema=schema)
        await cleanup.drop_schema()
        await cleanup.close()
    return rows


def resume_table(rows: list[ResumeRow]) -> Table:
    columns = ("backend", "events", "messages", "median ms", "best ms")
    table = figures_table("time to resume a stored session", columns)
    for r in rows:
        table.add_row(
            r.backend, f"{r.events:,}", f"{r.messages:,}", f"{r.median_ms:.1f}", f"{r.best_ms:.1f}"
        )
    return table


def run(runs: int = 5, postgres: str | None = None) -> list[ResumeRow]:
    return asyncio.run(run_resume(runs=runs, postgres=postgres))
