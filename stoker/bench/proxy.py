"""`stoker bench proxy`: a caching-off framework's traffic, direct and through the proxy.

The workload is `stoker bench cache`'s *hard* one, sent the way a framework with caching
off sends it: plain HTTP, the whole history every call, no `cache_control` anywhere, tool
schemas in the framework's own key order. A 24-call tool loop and a follow-up, a 6-minute
idle gap, a turn after it, a fork (the history plus another question), and a resume by a
new client that resends the history and runs 3 more steps.

Cost: the workload runs on the simulator over HTTP with one frozen clock, directly and
through `--optimize` (whose keep-warm crosses the gap on the same clock), and each is
priced against sending the same tokens with no cache (keep-warm pings included), next to
Stoker's own sessions on the same workload.

Latency: the proxy as it is deployed, a `stoker proxy` process of its own (with its
recorder process), in audit and in optimize mode, in front of a simulator process, the
client in this one; the gap is not waited out (time is not what this half measures).
Each request's time through a proxy less its time sent directly is what the proxy added;
every run is repeated and each request's fastest time kept, so the figure is the proxy's
own cost and not the noise of a shared machine; p50 and p99 over the requests.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from rich.table import Table

from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel, hard
from stoker.bench.children import child_server, free_port
from stoker.bench.tables import figures_table
from stoker.cache.models import model_info
from stoker.cache.pricing import input_units
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.providers.sim._http import workspace_of
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.server import SimServer, create_app, serve_in_background
from stoker.store.sqlite import SQLiteStore
from stoker.wire.dialects.anthropic import parse_usage
from stoker.wire.figures import json_ratio
from stoker.wire.usage import Usage

GAP = 360.0
FRAMEWORK_TOOLS = [  # the framework's own key order: name, description, schema
    {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in TOOLS
]
_RUN = {t.name: t.fn for t in TOOLS}


@dataclass(frozen=True, slots=True, kw_only=True)
class Added:
    """Latency a proxy added to each request, in milliseconds."""

    p50: float
    p99: float

    @classmethod
    def of(cls, through: list[list[float]], direct: list[list[float]]) -> Added:
        fastest = [min(run[i] for run in direct) for i in range(len(direct[0]))]
        proxied = [min(run[i] for run in through) for i in range(len(fastest))]
        added = [(p - d) * 1000 for p, d in zip(proxied, fastest, strict=True)]
        return cls(p50=statistics.median(added), p99=_percentile(added, 0.99))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyFigures:
    calls: int
    direct_cost: float  # input cost / input cost with no cache, sent directly
    optimized_cost: float  # the same through --optimize, keep-warm pings included
    stoker_cost: float  # Stoker's own sessions on the same workload (bench cache hard)
    pings: int
    audit: Added | None  # None: the latency half was not run
    optimize: Added | None
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        latency = {
            f"{mode}_added_latency_{q}_ms": round(getattr(added, q), 3)
            for mode, added in (("audit", self.audit), ("optimize", self.optimize))
            if added is not None
            for q in ("p50", "p99")
        }
        return {
            "calls": self.calls,
            "direct_cost_vs_no_cache": json_ratio(self.direct_cost),
            "optimize_cost_vs_no_cache": json_ratio(self.optimized_cost),
            "stoker_sessions_cost_vs_no_cache": json_ratio(self.stoker_cost),
            "optimize_vs_stoker": json_ratio(self.optimized_cost / self.stoker_cost),
            "keep_warm_pings": self.pings,
            **latency,
            "rounds": self.rounds,
        }


class Framework:
    """A client with caching off: builds each body from the whole history, every call."""

    def __init__(self, client: httpx2.Client, timings: list[float]) -> None:
        self.client = client
        self.timings = timings
        self.history: list[dict[str, Any]] = []
        self.usage: list[Usage] = []
        self.sent: list[list[dict[str, Any]]] = []  # each call's messages, as sent

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
        self.sent.append(list(messages))
        return answer

    def calls(self) -> list[tuple[list[dict[str, Any]], Usage]]:
        return list(zip(self.sent, self.usage, strict=True))

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
class Sent:
    """One call of the workload: the messages the client sent, the usage it got back."""

    messages: list[dict[str, Any]]
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    usage: list[Usage]
    timings: list[float]
    ledger: Usage  # every request the simulator billed for the key, pings included
    pings: int


def _workload(
    url: str, key: str, gap: Callable[[float], None], sent: list[Sent] | None = None
) -> tuple[list[Usage], list[float]]:
    timings: list[float] = []
    usage: list[Usage] = []
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    with httpx2.Client(base_url=url, headers=headers, timeout=60.0) as client:
        main = Framework(client, timings)
        main.turn("Audit the service: run 24 steps")
        main.turn("Summarise what you found")
        gap(GAP)
        main.turn("What should we fix first?")
        fork = Framework(client, timings)
        fork.turn("Anything worth remembering?", history=main.history)
        usage += main.usage + fork.usage
        if sent is not None:
            sent += [Sent(messages=m, usage=u) for f in (main, fork) for m, u in f.calls()]
    with httpx2.Client(base_url=url, headers=headers, timeout=60.0) as client:  # a new process
        resumed = Framework(client, timings)
        resumed.history = main.history
        resumed.turn("Fix the first one: run 3 steps")
        usage += resumed.usage
        if sent is not None:
            sent += [Sent(messages=m, usage=u) for m, u in resumed.calls()]
    return usage, timings


@contextmanager
def _served(
    home: Path, *, through_proxy: bool, optimize: bool = True
) -> Iterator[tuple[str, SimServer, Any]]:
    # The proxy is a peer of the benchmarks (both sit above the store): imported here.
    from stoker.proxy.app import create_app as create_proxy
    from stoker.proxy.core import ProxyConfig

    clock = FrozenClock()
    with ExitStack() as stack:
        sim = stack.enter_context(
            serve_in_background(create_app(SimEngine(model=WorkloadModel()), clock=clock))
        )
        if not through_proxy:
            yield sim.url, sim.app.state.sim, None
            return
        app = create_proxy(
            ProxyConfig(upstream=sim.url, optimize=optimize),
            sink=SQLiteStore(home / f"proxy-{'optimize' if optimize else 'audit'}.db"),
            clock=clock,
        )
        proxied = stack.enter_context(serve_in_background(app))
        stack.callback(app.state.proxy.close_from_thread)
        yield proxied.url, sim.app.state.sim, app.state.proxy


def _one(
    home: Path, *, through_proxy: bool, optimize: bool = True, sent: list[Sent] | None = None
) -> _Run:
    key = f"sk-bench-{uuid.uuid4().hex}"
    with _served(home, through_proxy=through_proxy, optimize=optimize) as (url, sim, proxy):

        def gap(seconds: float) -> None:
            if proxy is None or proxy.keep_warm is None:
                assert isinstance(sim.clock, FrozenClock)
                sim.clock.at += seconds
                return
            assert proxy.wait_recorded()
            proxy.run_on_loop(proxy.keep_warm.idle(seconds))

        usage, timings = _workload(url, key, gap, sent)
        if proxy is not None:
            assert proxy.wait_recorded()
        totals = sim.ledger.totals.get(workspace_of(key), {})
        ledger = Usage.total(t.usage for t in totals.values())
        requests = sum(t.requests for t in totals.values())
    return _Run(usage=usage, timings=timings, ledger=ledger, pings=requests - len(usage))


def proxied_workload(home: Path, *, optimize: bool) -> tuple[list[Sent], Path]:
    """The workload through a proxy (audit, or `--optimize`): every call the client sent
    with the usage the simulator reported, and the proxy's database (in `home`)."""
    sent: list[Sent] = []
    _one(home, through_proxy=True, optimize=optimize, sent=sent)
    return sent, home / f"proxy-{'optimize' if optimize else 'audit'}.db"


def _units(usage: Usage) -> float:
    return input_units(usage, model_info(DEFAULT_MODEL))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _latency(home: Path, rounds: int) -> tuple[Added, Added]:
    """Added latency of `stoker proxy` processes, audit and optimize, before a simulator
    process serving the workload's model."""
    python = sys.executable
    with ExitStack() as stack:
        port = free_port()
        sim = f"http://127.0.0.1:{port}"
        workload = [python, "-m", "stoker.bench.workload_server", str(port)]
        stack.enter_context(child_server(workload, sim + "/stats"))
        proxies = {}
        for mode in ("audit", "optimize"):
            port = free_port()
            command = [python, "-m", "stoker", "proxy", "--listen", f"127.0.0.1:{port}"]
            command += ["--upstream", sim, "--db", str(home / f"latency-{mode}.db")]
            if mode == "optimize":
                command.append("--optimize")
            proxies[mode] = f"http://127.0.0.1:{port}"
            stack.enter_context(child_server(command, proxies[mode] + "/stats"))
        timings: dict[str, list[list[float]]] = {"direct": [], "audit": [], "optimize": []}
        for _ in range(rounds):
            for name, url in (("direct", sim), *proxies.items()):
                timings[name].append(_workload(url, f"sk-bench-{uuid.uuid4().hex}", _no_gap)[1])
    direct = timings["direct"]
    return Added.of(timings["audit"], direct), Added.of(timings["optimize"], direct)


def _no_gap(seconds: float) -> None:
    return None


async def run_proxy_bench(rounds: int = 5, *, latency: bool = True) -> ProxyFigures:
    with tempfile.TemporaryDirectory(prefix="stoker-bench-proxy-") as tmp:
        home = Path(tmp)
        stoker = (await hard(home / "stoker")).total.cost_ratio
        direct = _one(home, through_proxy=False)
        proxied = _one(home, through_proxy=True)
        audit, optimize = _latency(home, rounds) if latency else (None, None)
    baseline = sum(u.input_total for u in direct.usage)
    return ProxyFigures(
        calls=len(direct.usage),
        direct_cost=_units(direct.ledger) / baseline,
        optimized_cost=_units(proxied.ledger) / baseline,
        stoker_cost=stoker,
        pings=proxied.pings,
        audit=audit,
        optimize=optimize,
        rounds=rounds,
    )


def proxy_table(f: ProxyFigures) -> Table:
    columns = ("sent", "cost vs no cache", "keep-warm pings", "added latency p50 / p99")
    table = figures_table(f"bench proxy: {f.calls} calls, caching off", columns, labels={"sent"})

    def added(a: Added | None) -> str:
        return "-" if a is None else f"{a.p50:.2f} / {a.p99:.2f} ms"

    table.add_row("directly to the simulator", f"{f.direct_cost:.3f}", "0", "-")
    table.add_row("through stoker proxy (audit)", "-", "-", added(f.audit))
    table.add_row(
        "through stoker proxy --optimize",
        f"{f.optimized_cost:.3f}",
        str(f.pings),
        added(f.optimize),
    )
    table.add_row("Stoker's own sessions (bench cache hard)", f"{f.stoker_cost:.3f}", "-", "-")
    return table
