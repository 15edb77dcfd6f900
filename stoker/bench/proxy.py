"""`stoker bench proxy`: a caching-off framework's traffic, direct and through --optimize.

The workload is `stoker bench cache`'s *hard* one, sent the way a framework with caching
off sends it: plain HTTP, the whole history every call, no `cache_control` anywhere, tool
schemas in the framework's own key order. A 24-call tool loop and a follow-up, a 6-minute
idle gap, a turn after it, a fork (the history plus another question), and a resume by a
new client that resends the history and runs 3 more steps.

It runs twice on the simulator over HTTP with one frozen clock: directly, and through
`stoker proxy --optimize` (whose keep-warm crosses the gap on the same clock). For each it
reports the input cost against sending the same tokens with no cache (keep-warm pings
included), next to Stoker's own sessions on the same workload. Added latency is the
per-request difference between the two runs on loopback: each run is repeated and each
request's fastest time kept, so the figure is the proxy's own cost, not the noise of a
shared machine; p50 and p99 over the requests.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.table import Table

from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel, hard
from stoker.cache.models import model_info
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim._http import workspace_of
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.server import SimServer, create_app, serve_in_background
from stoker.store.sqlite import SQLiteStore
from stoker.wire.dialects.anthropic import parse_usage
from stoker.wire.usage import Usage

GAP = 360.0
FRAMEWORK_TOOLS = [  # the framework's own key order: name, description, schema
    {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in TOOLS
]
_RUN = {t.name: t.fn for t in TOOLS}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyFigures:
    calls: int
    direct_cost: float  # input cost / input cost with no cache, sent directly
    optimized_cost: float  # the same through --optimize, keep-warm pings included
    stoker_cost: float  # Stoker's own sessions on the same workload (bench cache hard)
    pings: int
    added_p50_ms: float
    added_p99_ms: float
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "direct_cost_vs_no_cache": round(self.direct_cost, 4),
            "optimize_cost_vs_no_cache": round(self.optimized_cost, 4),
            "stoker_sessions_cost_vs_no_cache": round(self.stoker_cost, 4),
            "optimize_vs_stoker": round(self.optimized_cost / self.stoker_cost, 4),
            "keep_warm_pings": self.pings,
            "added_latency_p50_ms": round(self.added_p50_ms, 3),
            "added_latency_p99_ms": round(self.added_p99_ms, 3),
            "rounds": self.rounds,
        }


class Framework:
    """A client with caching off: builds each body from the whole history, every call."""

    def __init__(self, client: httpx.Client, timings: list[float]) -> None:
        self.client = client
        self.timings = timings
        self.history: list[dict[str, Any]] = []
        self.usage: list[Usage] = []

    def call(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "model": DEFAULT_MODEL,
            "max_tokens": 1024,
            "system": SYSTEM,
            "tools": FRAMEWORK_TOOLS,
            "messages": messages,
        }
        began = time.perf_counter()
        answer: dict[str, Any] = self.client.post("/v1/messages", json=body).json()
        self.timings.append(time.perf_counter() - began)
        self.usage.append(parse_usage(answer["usage"]))
        return answer

    def turn(self, text: str, history: list[dict[str, Any]] | None = None) -> None:
        """A user message and the tool loop after it, on `history` (default: its own)."""
        messages = [*(self.history if history is None else history)]
        messages.append({"role": "user", "content": text})
        while True:
            answer = self.call(messages)
            messages.append({"role": "assistant", "content": answer["content"]})
            calls = [b for b in answer["content"] if b["type"] == "tool_use"]
            if not calls:
                break
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": c["id"],
                            "content": str(_RUN[c["name"]](**c["input"])),
                        }
                        for c in calls
                    ],
                }
            )
        if history is None:
            self.history = messages


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    usage: list[Usage]
    timings: list[float]
    ledger: Usage  # every request the simulator billed for the key, pings included
    pings: int


def _workload(url: str, key: str, gap: Callable[[float], None]) -> tuple[list[Usage], list[float]]:
    timings: list[float] = []
    usage: list[Usage] = []
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=url, headers=headers, timeout=60.0) as client:
        main = Framework(client, timings)
        main.turn("Audit the service: run 24 steps")
        main.turn("Summarise what you found")
        gap(GAP)
        main.turn("What should we fix first?")
        fork = Framework(client, timings)
        fork.turn("Anything worth remembering?", history=main.history)
        usage += main.usage + fork.usage
    with httpx.Client(base_url=url, headers=headers, timeout=60.0) as client:  # a new process
        resumed = Framework(client, timings)
        resumed.history = main.history
        resumed.turn("Fix the first one: run 3 steps")
        usage += resumed.usage
    return usage, timings


@contextmanager
def _served(home: Path, *, through_proxy: bool) -> Iterator[tuple[str, SimServer, Any]]:
    # The proxy is a peer of the benchmarks (both sit above the store): imported here.
    from stoker.proxy.app import ProxyConfig
    from stoker.proxy.app import create_app as create_proxy

    clock = FrozenClock()
    with ExitStack() as stack:
        sim = stack.enter_context(
            serve_in_background(create_app(SimEngine(model=WorkloadModel()), clock=clock))
        )
        if not through_proxy:
            yield sim.url, sim.app.state.sim, None
            return
        app = create_proxy(
            ProxyConfig(upstream=sim.url, optimize=True),
            sink=SQLiteStore(home / f"proxy-{uuid.uuid4().hex[:8]}.db"),
            clock=clock,
        )
        proxied = stack.enter_context(serve_in_background(app))
        stack.callback(app.state.proxy.close_from_thread)
        yield proxied.url, sim.app.state.sim, app.state.proxy


def _one(home: Path, *, through_proxy: bool) -> _Run:
    key = f"sk-bench-{uuid.uuid4().hex}"
    with _served(home, through_proxy=through_proxy) as (url, sim, proxy):

        def gap(seconds: float) -> None:
            if proxy is None or proxy.keep_warm is None:
                assert isinstance(sim.clock, FrozenClock)
                sim.clock.at += seconds
                return
            assert proxy.wait_recorded()
            proxy.run_on_loop(proxy.keep_warm.idle(seconds))

        usage, timings = _workload(url, key, gap)
        if proxy is not None:
            assert proxy.wait_recorded()
        totals = sim.ledger.totals.get(workspace_of(key), {})
        ledger = Usage.total(t.usage for t in totals.values())
        requests = sum(t.requests for t in totals.values())
    return _Run(usage=usage, timings=timings, ledger=ledger, pings=requests - len(usage))


def _units(usage: Usage) -> float:
    info = model_info(DEFAULT_MODEL)
    return (
        usage.uncached
        + info.write_5m * usage.written_5m
        + info.write_1h * usage.written_1h
        + info.read * usage.read
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def run_proxy_bench(rounds: int = 3) -> ProxyFigures:
    with tempfile.TemporaryDirectory(prefix="stoker-bench-proxy-") as tmp:
        home = Path(tmp)
        stoker = (await hard(home / "stoker")).total.cost_ratio
        direct = [_one(home, through_proxy=False) for _ in range(rounds)]
        proxied = [_one(home, through_proxy=True) for _ in range(rounds)]
    baseline = sum(u.input_total for u in direct[0].usage)
    fastest_direct = [min(r.timings[i] for r in direct) for i in range(len(direct[0].timings))]
    fastest_proxied = [min(r.timings[i] for r in proxied) for i in range(len(fastest_direct))]
    added = [(p - d) * 1000 for p, d in zip(fastest_proxied, fastest_direct, strict=True)]
    return ProxyFigures(
        calls=len(direct[0].usage),
        direct_cost=_units(direct[0].ledger) / baseline,
        optimized_cost=_units(proxied[0].ledger) / baseline,
        stoker_cost=stoker,
        pings=proxied[0].pings,
        added_p50_ms=statistics.median(added),
        added_p99_ms=_percentile(added, 0.99),
        rounds=rounds,
    )


def proxy_table(f: ProxyFigures) -> Table:
    table = Table(title=f"bench proxy: {f.calls} calls, caching off", title_justify="left")
    for col in ("sent", "cost vs no cache", "keep-warm pings", "added latency p50 / p99"):
        table.add_column(col, justify="left" if col == "sent" else "right")
    table.add_row("directly to the simulator", f"{f.direct_cost:.3f}", "0", "-")
    table.add_row(
        "through stoker proxy --optimize",
        f"{f.optimized_cost:.3f}",
        str(f.pings),
        f"{f.added_p50_ms:.2f} / {f.added_p99_ms:.2f} ms",
    )
    table.add_row("Stoker's own sessions (bench cache hard)", f"{f.stoker_cost:.3f}", "-", "-")
    return table
