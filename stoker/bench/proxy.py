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
LATENCY_ROUTES = (  # the ways the latency half sends the workload, beside sending it directly
    "audit",  # a `stoker proxy` process
    "optimize",  # one with --optimize
    "in_process_audit",  # stoker.http_client(), recording on its own thread
    "in_process_optimize",
    "in_process_child_audit",  # recorder="process": a child process records
    "in_process_child_optimize",
)
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
    in_process_cost: float  # the same through stoker.http_client(optimize=True)
    in_process_pings: int
    proxy_writes: float  # written (keep-warm too) / the ideal, through --optimize
    in_process_writes: float  # and in process
    added: dict[str, Added]  # by route (`LATENCY_ROUTES`); empty: the latency half not run
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        latency = {
            f"{route}_added_latency_{q}_ms": round(getattr(added, q), 3)
            for route, added in self.added.items()
            for q in ("p50", "p99")
        }
        return {
            "calls": self.calls,
            "direct_cost_vs_no_cache": json_ratio(self.direct_cost),
            "optimize_cost_vs_no_cache": json_ratio(self.optimized_cost),
            "stoker_sessions_cost_vs_no_cache": json_ratio(self.stoker_cost),
            "optimize_vs_stoker": json_ratio(self.optimized_cost / self.stoker_cost),
            "keep_warm_pings": self.pings,
            "in_process_cost_vs_no_cache": json_ratio(self.in_process_cost),
            "in_process_vs_proxy": json_ratio(self.in_process_cost / self.optimized_cost),
            "in_process_keep_warm_pings": self.in_process_pings,
            "optimize_writes_vs_ideal": json_ratio(self.proxy_writes),
            "in_process_writes_vs_ideal": json_ratio(self.in_process_writes),
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


Connect = Callable[[], httpx2.Client]
"""A new client of the workload (a new process would make one): plain, or Stoker's."""


def _plain() -> httpx2.Client:
    return httpx2.Client(timeout=60.0)


def _workload(
    url: str,
    key: str,
    gap: Callable[[float], None],
    sent: list[Sent] | None = None,
    connect: Connect = _plain,
) -> tuple[list[Usage], list[float]]:
    timings: list[float] = []
    usage: list[Usage] = []
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}

    def client() -> httpx2.Client:
        made = connect()
        made.base_url = httpx2.URL(url)
        made.headers.update(headers)
        return made

    with client() as client_:
        main = Framework(client_, timings)
        main.turn("Audit the service: run 24 steps")
        main.turn("Summarise what you found")
        gap(GAP)
        main.turn("What should we fix first?")
        fork = Framework(client_, timings)
        fork.turn("Anything worth remembering?", history=main.history)
        usage += main.usage + fork.usage
        if sent is not None:
            sent += [Sent(messages=m, usage=u) for f in (main, fork) for m, u in f.calls()]
    with client() as client_:  # a new process
        resumed = Framework(client_, timings)
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
    home: Path,
    *,
    through_proxy: bool,
    optimize: bool = True,
    sent: list[Sent] | None = None,
    in_process: bool = False,
) -> _Run:
    """The workload once: directly, through a proxy, or (`in_process`) through
    `stoker.http_client()` in this process, each client it makes a new process's."""
    from stoker.proxy.in_process import http_client

    key = f"sk-bench-{uuid.uuid4().hex}"
    made: list[Any] = []
    with _served(home, through_proxy=through_proxy, optimize=optimize) as (url, sim, proxy):
        assert isinstance(sim.clock, FrozenClock)
        clock = sim.clock

        def connect() -> httpx2.Client:
            db = home / f"in-process-{'optimize' if optimize else 'audit'}.db"
            made.append(http_client(sync=True, optimize=optimize, db=db, clock=clock))
            return made[-1]  # type: ignore[no-any-return]

        def gap(seconds: float) -> None:
            core = made[-1].stoker if made else proxy
            if core is None or core.keep_warm is None:
                clock.at += seconds
                return
            assert core.wait_recorded()
            core.run_on_loop(core.keep_warm.idle(seconds))

        usage, timings = _workload(url, key, gap, sent, connect if in_process else _plain)
        if proxy is not None:
            assert proxy.wait_recorded()
        ledger, requests = billed(sim, key)
    return _Run(usage=usage, timings=timings, ledger=ledger, pings=requests - len(usage))


def billed(sim: SimServer, key: str) -> tuple[Usage, int]:
    """Every request the simulator billed for `key`, keep-warm included: added up, and
    how many."""
    totals = sim.ledger.totals.get(workspace_of(key), {})
    return Usage.total(t.usage for t in totals.values()), sum(t.requests for t in totals.values())


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


def _latency(home: Path, rounds: int) -> dict[str, Added]:
    """Added latency of `stoker proxy` processes, audit and optimize, and of
    `stoker.http_client()` in this process in each mode, before a simulator process
    serving the workload's model; by route."""
    from stoker.proxy.in_process import Recording, http_client

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

        def in_process(route: str) -> Connect:
            optimize, db = route.endswith("optimize"), home / f"latency-{route}.db"
            recorder: Recording = "process" if "child" in route else "inline"
            return lambda: http_client(sync=True, optimize=optimize, db=db, recorder=recorder)

        routes: dict[str, tuple[str, Connect]] = {
            "direct": (sim, _plain),
            **{mode: (url, _plain) for mode, url in proxies.items()},
            **{route: (sim, in_process(route)) for route in LATENCY_ROUTES[2:]},
        }
        timings: dict[str, list[list[float]]] = {name: [] for name in routes}
        for _ in range(rounds):
            for name, (url, connect) in routes.items():
                key = f"sk-bench-{uuid.uuid4().hex}"
                timings[name].append(_workload(url, key, _no_gap, connect=connect)[1])
    direct = timings.pop("direct")
    return {name: Added.of(through, direct) for name, through in timings.items()}


def _no_gap(seconds: float) -> None:
    return None


async def ideal_writes(db: Path) -> int:
    """What an ideal run of the traffic in `db` writes (each token once), as
    `stoker report-proxy` counts it over every lineage."""
    async with SQLiteStore(db) as store:
        lineages = await store.proxy_lineages(limit=1_000)
        calls = [await store.proxy_calls(lineage.id) for lineage in lineages]
    return sum(e.ideal for exchanges in calls for e in exchanges)


async def run_proxy_bench(rounds: int = 5, *, latency: bool = True) -> ProxyFigures:
    with tempfile.TemporaryDirectory(prefix="stoker-bench-proxy-") as tmp:
        home = Path(tmp)
        stoker = (await hard(home / "stoker")).total.cost_ratio
        direct = _one(home, through_proxy=False)
        proxied = _one(home, through_proxy=True)
        inside = _one(home, through_proxy=False, in_process=True)
        # the same traffic either way: one ideal, the proxy's (a new process's client
        # in process knows nothing of the calls an earlier one sent, so its own overcounts)
        ideal = await ideal_writes(home / "proxy-optimize.db")
        added = _latency(home, rounds) if latency else {}
    baseline = sum(u.input_total for u in direct.usage)
    return ProxyFigures(
        calls=len(direct.usage),
        direct_cost=_units(direct.ledger) / baseline,
        optimized_cost=_units(proxied.ledger) / baseline,
        stoker_cost=stoker,
        pings=proxied.pings,
        in_process_cost=_units(inside.ledger) / baseline,
        in_process_pings=inside.pings,
        proxy_writes=proxied.ledger.written / ideal,
        in_process_writes=inside.ledger.written / ideal,
        added=added,
        rounds=rounds,
    )


def proxy_table(f: ProxyFigures) -> Table:
    columns = (
        "sent",
        "cost vs no cache",
        "writes vs ideal",
        "keep-warm pings",
        "added latency p50 / p99",
    )
    table = figures_table(f"bench proxy: {f.calls} calls, caching off", columns, labels={"sent"})

    def added(route: str) -> str:
        a = f.added.get(route)
        return "-" if a is None else f"{a.p50:.2f} / {a.p99:.2f} ms"

    table.add_row("directly to the simulator", f"{f.direct_cost:.3f}", "-", "0", "-")
    table.add_row("through stoker proxy (audit)", "-", "-", "-", added("audit"))
    table.add_row(
        "through stoker proxy --optimize",
        f"{f.optimized_cost:.3f}",
        f"{f.proxy_writes:.3f}x",
        str(f.pings),
        added("optimize"),
    )
    table.add_row("stoker.http_client() (audit)", "-", "-", "-", added("in_process_audit"))
    table.add_row(
        "stoker.http_client(optimize=True)",
        f"{f.in_process_cost:.3f}",
        f"{f.in_process_writes:.3f}x",
        str(f.in_process_pings),
        added("in_process_optimize"),
    )
    for route, label in (
        ("in_process_child_audit", "audit"),
        ("in_process_child_optimize", "optimize=True"),
    ):
        name = f'stoker.http_client({label}, recorder="process")'.replace("(audit, ", "(")
        table.add_row(name, "-", "-", "-", added(route))
    table.add_row("Stoker's own sessions (bench cache hard)", f"{f.stoker_cost:.3f}", "-", "-", "-")
    return table
