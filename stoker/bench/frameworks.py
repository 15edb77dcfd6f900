"""`stoker bench frameworks`: each framework's own agent, in process and through the proxy.

The frameworks users run today (pydantic-ai, LangGraph with `ChatOpenAI` and with
`ChatAnthropic`, openai-agents, smolagents) each drive the same conversation on the
simulator: a long system prompt, a tool the model calls, four questions, and a 6-minute
idle gap before the last. Three ways, each with a key of its own on one frozen clock:

- directly, through a plain `httpx2` client (the no-cache baseline: its input, unread);
- through `stoker proxy --optimize` (the framework's base URL pointed at it);
- through `stoker.http_client(optimize=True)` in the framework's own process.

For each: input cost against sending the same tokens with no cache (keep-warm included,
from the simulator's own ledger of the key), what was written against the ideal (each
token once, as the proxy's report counts it), and the keep-warm requests sent. The two
Stoker routes apply one implementation (`stoker.proxy.core`), so their figures should
agree: the benchmark says by how much.

Needs the `frameworks` extra (the frameworks themselves); time is not measured here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from pydantic import SecretStr
from rich.table import Table

from stoker.bench.proxy import billed, ideal_writes
from stoker.bench.tables import figures_table
from stoker.cache.models import model_info
from stoker.cache.pricing import input_units
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.extras import require
from stoker.providers.sim.server import ServedSim, create_app, serve_in_background
from stoker.store.sqlite import SQLiteStore
from stoker.wire.figures import json_ratio

GAP = 360.0
SYSTEM = "You review pull requests for a Python team. " + "Keep every answer short. " * 600
QUESTIONS = (
    "What is the weather forecast in Paris?",
    "And the weather in Rome?",
    "What is the weather in Oslo?",
    "Finally, the weather in Lima?",
)


def weather(city: str) -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}, 21 C: that is the final answer"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where a framework's client sends: a base URL (Anthropic style, no /v1), its key,
    and the HTTP client to send through."""

    url: str
    key: str
    http: Any  # httpx2.Client or httpx2.AsyncClient, as the framework takes it

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"


Gap = Callable[[], Any]  # crosses the idle gap (awaited by an async framework)
Converse = Callable[[Target, Gap], Any]


# -- each framework's agent, as its users write it ----------------------------------------------


async def _pydantic_ai(target: Target, gap: Gap) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_key=target.key, base_url=target.url, http_client=target.http)
    agent = Agent(AnthropicModel(DEFAULT_MODEL, provider=provider), system_prompt=SYSTEM)
    agent.tool_plain(weather)
    history: list[Any] = []
    for n, question in enumerate(QUESTIONS):
        if n == len(QUESTIONS) - 1:
            await gap()
        result = await agent.run(question, message_history=history)
        history = result.all_messages()


def _graph(model: Any, *, sync: bool) -> Any:
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    if sync:

        def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

    else:

        async def call_model(state: MessagesState) -> dict[str, Any]:  # type: ignore[misc]
            return {"messages": [await model.ainvoke(state["messages"])]}

    from langchain_core.tools import tool

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([tool(weather)]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def _langgraph_openai(target: Target, gap: Gap) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    key = SecretStr(target.key)
    chat = ChatOpenAI(
        model="gpt-4.1", base_url=target.openai_url, api_key=key, http_client=target.http
    )
    agent = _graph(chat.bind_tools([tool(weather)]), sync=True)
    messages: list[Any] = [SystemMessage(SYSTEM)]
    for n, question in enumerate(QUESTIONS):
        if n == len(QUESTIONS) - 1:
            gap()
        messages = agent.invoke({"messages": [*messages, HumanMessage(question)]})["messages"]


async def _langgraph_anthropic(target: Target, gap: Gap) -> None:
    import anthropic
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool

    # as keywords: its pydantic signature lists fields with defaults as required
    settings: dict[str, Any] = {"base_url": target.url, "api_key": SecretStr(target.key)}
    chat = ChatAnthropic(model_name=DEFAULT_MODEL, **settings)
    # ChatAnthropic takes no HTTP client (docs/frameworks.md): its async client, built from
    # its own settings over ours
    params = chat._client_params  # noqa: SLF001
    chat._async_client = anthropic.AsyncAnthropic(**params, http_client=target.http)  # noqa: SLF001
    agent = _graph(chat.bind_tools([tool(weather)]), sync=False)
    messages: list[Any] = [SystemMessage(SYSTEM)]
    for n, question in enumerate(QUESTIONS):
        if n == len(QUESTIONS) - 1:
            await gap()
        state = await agent.ainvoke({"messages": [*messages, HumanMessage(question)]})
        messages = state["messages"]


async def _openai_agents(target: Target, gap: Gap) -> None:
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(api_key=target.key, base_url=target.openai_url, http_client=target.http)
    model = OpenAIResponsesModel("gpt-4.1", openai_client=client)
    agent = Agent(name="reviewer", instructions=SYSTEM, model=model, tools=[function_tool(weather)])
    history: list[Any] = []
    for n, question in enumerate(QUESTIONS):
        if n == len(QUESTIONS) - 1:
            await gap()
        result = await Runner.run(agent, [*history, {"role": "user", "content": question}])
        history = result.to_input_list()


def _smolagents(target: Target, gap: Gap) -> None:
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    model = OpenAIServerModel(
        "gpt-4.1",
        api_base=target.openai_url,
        api_key=target.key,
        client_kwargs={"http_client": target.http},
    )
    agent = ToolCallingAgent(
        tools=[tool(weather)], model=model, instructions=SYSTEM, max_steps=3, verbosity_level=0
    )
    for n, question in enumerate(QUESTIONS):
        if n == len(QUESTIONS) - 1:
            gap()
        agent.run(question, reset=n == 0)


FRAMEWORKS: dict[str, tuple[Converse, str]] = {  # name: (its agent, the model it runs)
    "pydantic-ai (Anthropic)": (_pydantic_ai, DEFAULT_MODEL),
    "LangGraph + ChatOpenAI": (_langgraph_openai, "gpt-4.1"),
    "LangGraph + ChatAnthropic": (_langgraph_anthropic, DEFAULT_MODEL),
    "openai-agents (Responses)": (_openai_agents, "gpt-4.1"),
    "smolagents (Chat)": (_smolagents, "gpt-4.1"),
}


# -- running one three ways -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    calls: int
    cost: float  # input cost / the same tokens with no cache
    written: int
    pings: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkFigures:
    name: str
    model: str
    proxy: Route
    in_process: Route
    ideal: int  # tokens an ideal run writes (each once), from the proxy's record
    free_writes: bool  # the model's writes cost nothing (OpenAI's implicit cache)

    def writes(self, route: Route) -> float | None:
        return None if self.free_writes or not self.ideal else route.written / self.ideal

    def to_dict(self) -> dict[str, Any]:
        return {
            "framework": self.name,
            "model": self.model,
            "calls": self.in_process.calls,
            "proxy_cost_vs_no_cache": json_ratio(self.proxy.cost),
            "in_process_cost_vs_no_cache": json_ratio(self.in_process.cost),
            "in_process_vs_proxy": json_ratio(self.in_process.cost / self.proxy.cost),
            "proxy_writes_vs_ideal": json_ratio(self.writes(self.proxy)),
            "in_process_writes_vs_ideal": json_ratio(self.writes(self.in_process)),
            "proxy_keep_warm": self.proxy.pings,
            "in_process_keep_warm": self.in_process.pings,
        }


@contextmanager
def _world(home: Path) -> Iterator[tuple[ServedSim, str, Any]]:
    """A simulator and a `stoker proxy --optimize` before it, on one frozen clock."""
    from stoker.proxy.app import create_app as create_proxy
    from stoker.proxy.core import ProxyConfig

    clock = FrozenClock()
    with ExitStack() as stack:
        sim = stack.enter_context(serve_in_background(create_app(clock=clock)))
        app = create_proxy(
            ProxyConfig(upstream=sim.url, optimize=True),
            sink=SQLiteStore(home / "proxy.db"),
            clock=clock,
        )
        proxied = stack.enter_context(serve_in_background(app))
        stack.callback(app.state.proxy.close_from_thread)
        yield sim, proxied.url, app.state.proxy


def _run(converse: Converse, target: Target, gap: Gap) -> None:
    """One conversation through `target`; what a framework prints to follow its steps
    (smolagents does) is not the benchmark's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        _converse(converse, target, gap)


def _converse(converse: Converse, target: Target, gap: Gap) -> None:
    if inspect.iscoroutinefunction(converse):

        async def run() -> None:
            async with target.http:
                await converse(target, gap)

        asyncio.run(run())
    else:
        with target.http:
            converse(target, gap)


def _route(sim: ServedSim, key: str, calls: int, model: str, no_cache: int) -> Route:
    usage, requests = billed(sim.app.state.sim, key)
    cost = input_units(usage, model_info(model)) / no_cache
    return Route(calls=calls, cost=cost, written=usage.written, pings=requests - calls)


def run_framework(name: str, home: Path) -> FrameworkFigures:
    """One framework's conversation directly, through the proxy, and in process."""
    from stoker.proxy.in_process import http_client

    converse, model = FRAMEWORKS[name]
    asynchronous = inspect.iscoroutinefunction(converse)
    keys = {route: f"sk-bench-{route}-{uuid.uuid4().hex}" for route in ("direct", "proxy", "in")}
    with _world(home) as (sim, proxy_url, proxy):
        clock = sim.app.state.sim.clock
        assert isinstance(clock, FrozenClock)

        def plain() -> Any:
            return httpx2.AsyncClient(timeout=60) if asynchronous else httpx2.Client(timeout=60)

        def passing() -> None:
            clock.at += GAP

        def through_proxy() -> None:
            assert proxy.wait_recorded()
            proxy.run_on_loop(proxy.keep_warm.idle(GAP))

        http: Any = (
            http_client(optimize=True, db=home / "in-process.db", clock=clock)
            if asynchronous
            else http_client(sync=True, optimize=True, db=home / "in-process.db", clock=clock)
        )

        def inside() -> None:
            assert http.stoker.wait_recorded()
            http.stoker.run_on_loop(http.stoker.keep_warm.idle(GAP))

        gaps: dict[str, Gap] = {"direct": passing, "proxy": through_proxy, "in": inside}
        if asynchronous:  # the same, awaited on the framework's loop
            gaps = {route: _awaited(gap) for route, gap in gaps.items()}
        _run(converse, Target(url=sim.url, key=keys["direct"], http=plain()), gaps["direct"])
        _run(converse, Target(url=proxy_url, key=keys["proxy"], http=plain()), gaps["proxy"])
        _run(converse, Target(url=sim.url, key=keys["in"], http=http), gaps["in"])
        assert proxy.wait_recorded()
        # no cache: the tokens sent directly, each at the base price
        direct, calls = billed(sim.app.state.sim, keys["direct"])
        proxied = _route(sim, keys["proxy"], calls, model, direct.input_total)
        inside_route = _route(sim, keys["in"], calls, model, direct.input_total)
    return FrameworkFigures(
        name=name,
        model=model,
        proxy=proxied,
        in_process=inside_route,
        ideal=asyncio.run(ideal_writes(home / "proxy.db")),
        free_writes=model_info(model).regime == "L",
    )


def _awaited(gap: Gap) -> Gap:
    """`gap` for an async framework: run in a thread, so the framework's loop goes on."""

    async def run() -> None:
        await asyncio.to_thread(gap)

    return run


def run_frameworks_bench(names: list[str] | None = None) -> list[FrameworkFigures]:
    require("frameworks", "stoker bench frameworks")
    figures = []
    for name in names or list(FRAMEWORKS):
        with tempfile.TemporaryDirectory(prefix="stoker-bench-frameworks-") as tmp:
            figures.append(run_framework(name, Path(tmp)))
    return figures


def frameworks_table(figures: list[FrameworkFigures]) -> Table:
    columns = (
        "framework (model)",
        "calls",
        "cost vs no cache: proxy / in process",
        "writes vs ideal: proxy / in process",
        "keep-warm",
    )
    table = figures_table(
        "bench frameworks: --optimize, proxy and in process", columns, labels={"framework (model)"}
    )

    def writes(f: FrameworkFigures, route: Route) -> str:
        ratio = f.writes(route)
        return "free" if ratio is None else f"{ratio:.3f}x"

    for f in figures:
        table.add_row(
            f"{f.name} ({f.model})",
            str(f.in_process.calls),
            f"{f.proxy.cost:.3f} / {f.in_process.cost:.3f}",
            f"{writes(f, f.proxy)} / {writes(f, f.in_process)}",
            f"{f.proxy.pings} / {f.in_process.pings}",
        )
    return table
