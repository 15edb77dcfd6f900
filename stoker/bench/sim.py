"""The simulator's own cost per provider call, in process and over HTTP.

Every test and benchmark runs on the simulator, so its time per call bounds them all. A
conversation of N messages (a system prompt above the cache minimum, a tool, questions
and answers) grows by one answer and one question per call, with the breakpoints a
session places (1h at the end of the system prompt, 5m rolling on the newest block).
In process, a call is `SimProvider.complete` (render, engine, parse); over HTTP it is
one request to a child `stoker sim serve` on loopback, timed as a client sees it (JSON
both ways included). Both APIs are measured: Anthropic Messages and OpenAI Responses.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
from rich.table import Table

from stoker.bench.children import child_server, free_port
from stoker.bench.tables import figures_table
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.providers.base import CallContext
from stoker.providers.sim.provider import SimProvider
from stoker.wire.blocks import TextBlock
from stoker.wire.dialects import dialect_module
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Breakpoint, Request

HISTORY_SIZES = (10, 100, 1000)
MODELS = {"anthropic": DEFAULT_MODEL, "openai_responses": "gpt-5.6"}
_PATHS = {"anthropic": "/v1/messages", "openai_responses": "/v1/responses"}
_TOOL = (
    b'{"description":"Read a file of the workspace.","input_schema":{"properties":{"path":'
    b'{"type":"string"}},"required":["path"],"type":"object"},"name":"read_file"}'
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimBenchRow:
    dialect: str
    transport: str
    history: int
    calls: int
    mean_ms: float
    median_ms: float
    p95_ms: float


class _Conversation:
    """A growing history rendered the way a session renders it (one memo per lineage)."""

    def __init__(self, dialect: str, history: int) -> None:
        system = "You are a careful assistant. " + "Follow the house rules. " * 400
        self.prefix = Prefix(
            params=CacheParams(model=MODELS[dialect]), tools=(_TOOL,), system=system
        )
        self.messages: list[Message] = []
        for i in range(history // 2):
            self.messages.append(UserMessage(content=(TextBlock(text=f"question {i}"),)))
            self.messages.append(AssistantMessage(content=(TextBlock(text=f"answer {i}"),)))
        self.memo: dict[str, Any] = {}
        self.turn = 0

    def next_request(self) -> Request:
        self.messages.append(UserMessage(content=(TextBlock(text=f"turn {self.turn}"),)))
        self.turn += 1
        last = len(self.messages) - 1
        return Request(
            prefix=self.prefix,
            messages=tuple(self.messages),
            max_tokens=1024,
            breakpoints=(Breakpoint(ttl="1h"), Breakpoint(message=last, block=-1)),
            render_memo=self.memo,
        )


def _row(dialect: str, transport: str, history: int, samples: list[float]) -> SimBenchRow:
    samples.sort()
    return SimBenchRow(
        dialect=dialect,
        transport=transport,
        history=history,
        calls=len(samples),
        mean_ms=statistics.fmean(samples),
        median_ms=statistics.median(samples),
        p95_ms=samples[max(0, int(len(samples) * 0.95) - 1)],
    )


async def _in_process(dialect: str, history: int, calls: int) -> SimBenchRow:
    clock = FrozenClock()
    provider = SimProvider(clock=clock, keep_requests=False)
    conversation = _Conversation(dialect, history)
    samples: list[float] = []
    for _ in range(calls + 1):  # the first call writes the cache and is not counted
        request = conversation.next_request()
        start = time.perf_counter_ns()
        completion = await provider.complete(request, CallContext(session_id="bench"))
        samples.append((time.perf_counter_ns() - start) / 1e6)
        conversation.messages.append(completion.message)
        clock.advance(10.0)
    return _row(dialect, "in process", history, samples[1:])


def _over_http(client: httpx2.Client, dialect: str, history: int, calls: int) -> SimBenchRow:
    module = dialect_module(dialect)
    conversation = _Conversation(dialect, history)
    samples: list[float] = []
    for _ in range(calls + 1):
        payload = module.render_request(conversation.next_request())
        start = time.perf_counter_ns()
        response = client.post(_PATHS[dialect], json=payload)
        body = response.json()
        samples.append((time.perf_counter_ns() - start) / 1e6)
        response.raise_for_status()
        conversation.messages.append(module.parse_response(body)[0])
    return _row(dialect, "HTTP", history, samples[1:])


@contextmanager
def sim_serve() -> Iterator[str]:
    """A child `stoker sim serve` on a free loopback port, for as long as the block runs.

    A child, not a thread: a server in this process shares its interpreter lock with the
    client that times it (and answered ~40 ms late per request when tried).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "stoker", "sim", "serve", "--port", str(port)]
    with child_server(command, url + "/stats"):
        yield url


def run_sim_bench(
    *, calls: int = 200, sizes: tuple[int, ...] = HISTORY_SIZES, http: bool = True
) -> list[SimBenchRow]:
    """Time `calls` calls per API, transport and starting history size."""
    rows = [asyncio.run(_in_process(dialect, size, calls)) for dialect in MODELS for size in sizes]
    if http:
        with (
            sim_serve() as url,
            httpx2.Client(
                base_url=url, headers={"x-api-key": "bench", "authorization": "Bearer bench"}
            ) as client,
        ):
            rows += [
                _over_http(client, dialect, size, calls) for dialect in MODELS for size in sizes
            ]
    return rows


def sim_table(rows: list[SimBenchRow]) -> Table:
    columns = ("API", "transport", "history (messages)", "calls", "mean ms", "median ms", "p95 ms")
    table = figures_table(
        "simulator time per provider call (sim model)", columns, labels={"API", "transport"}
    )
    for r in rows:
        table.add_row(
            r.dialect,
            r.transport,
            f"{r.history:,}",
            str(r.calls),
            f"{r.mean_ms:.2f}",
            f"{r.median_ms:.2f}",
            f"{r.p95_ms:.2f}",
        )
    return table
