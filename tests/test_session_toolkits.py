"""Toolkits in a live session: prewarm, fetch counts, notes at turn boundaries, and
tools[] bytes that never move when toolkits come, go, or reorder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stoker.agent.delegate import delegate_tool
from stoker.agent.integrations import Integrations
from stoker.clock import FrozenClock
from stoker.integrations import (
    IntegrationContext,
    McpToolkit,
    PluginToolkit,
    ToolkitCache,
    ToolkitRegistry,
)
from stoker.providers.sim.model import RuleModel, tool_call
from stoker.tools import tool
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.events import ConfigChanged, MemorySink
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request
from tests.helpers import make_registry, sim_agent
from tests.mcp_servers import shuffling_stdio


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _setup(clock: FrozenClock, *toolkits: Any, model: Any = None):  # type: ignore[no-untyped-def]
    integrations = Integrations(
        registry=ToolkitRegistry(list(toolkits)), cache=ToolkitCache(ttl=300.0, clock=clock)
    )
    agent, provider = sim_agent(
        model=model,
        clock=clock,
        registry=make_registry(),
        tools=[delegate_tool()],
        integrations=integrations,
    )
    return agent, provider, integrations


def _user_notes(payload: dict[str, Any]) -> list[str]:
    last = payload["messages"][-1]["content"]
    return [b["text"] for b in last[1:] if b["type"] == "text"]


async def test_prewarmed_session_first_turn_fetches_nothing_and_offers_the_toolkit() -> None:
    clock = FrozenClock()
    calc = PluginToolkit("calc", [add])
    agent, provider, integrations = _setup(clock, calc)
    await integrations.cache.get(calc, IntegrationContext())
    assert integrations.cache.fetch_count("calc") == 1
    session = agent.session()
    await session.send("hello")
    assert integrations.cache.fetch_count("calc") == 1  # turn 1 fetched nothing
    assert _user_notes(provider.requests[0]) == ["Toolkit 'calc' connected: 1 tool (add)."]
    names = [t["name"] for t in provider.requests[0]["tools"]]
    assert {"delegate", "use_toolkit"} <= set(names)
    assert "add" not in names


async def test_cold_cache_first_turn_fetches_exactly_once() -> None:
    clock = FrozenClock()
    agent, provider, integrations = _setup(clock, PluginToolkit("calc", [add]))
    session = agent.session()
    await session.send("hello")
    await session.send("again")
    assert integrations.cache.fetch_count("calc") == 1
    assert _user_notes(provider.requests[0]) == ["Toolkit 'calc' connected: 1 tool (add)."]
    assert _user_notes(provider.requests[-1]) == []


async def test_a_toolkit_connecting_mid_session_changes_no_tool_bytes_and_is_announced() -> None:
    clock = FrozenClock()
    agent, provider, integrations = _setup(clock, PluginToolkit("calc", [add]))
    session = agent.session()
    await session.send("hello")
    before = json.dumps(provider.requests[-1]["tools"])
    integrations.registry.register(PluginToolkit("weather", [weather]))
    await session.send("what now?")
    assert json.dumps(provider.requests[-1]["tools"]) == before
    assert _user_notes(provider.requests[-1]) == ["Toolkit 'weather' connected: 1 tool (weather)."]
    assert session.records[-1].explanation.verdict == "hit"


async def test_mcp_server_reordering_its_tools_on_reconnect_leaves_tools_unchanged(
    tmp_path: Path,
) -> None:
    clock = FrozenClock()
    mcp = McpToolkit("shuffle", shuffling_stdio(tmp_path), timeout=10.0)
    agent, provider, integrations = _setup(clock, mcp)
    try:
        sink = MemorySink()
        session = agent.session(store=sink)
        await session.send("hello")
        await mcp.close()  # the server goes away; the next fetch reconnects
        integrations.cache.invalidate("shuffle")
        await session.send("again")
    finally:
        await mcp.close()
    served = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    assert len(served) == 2
    assert served[0] != served[1]  # the raw orders really differed
    views = [e.changes for e in sink.events if isinstance(e, ConfigChanged)]
    assert len(views) == 1  # the view was announced once; the reordered one is the same
    assert json.dumps(provider.requests[0]["tools"]) == json.dumps(provider.requests[-1]["tools"])
    assert _user_notes(provider.requests[-1]) == []


class ToolkitUser:
    """Delegates to the 'calc' toolkit; the child calls `add` through use_toolkit."""

    def __init__(self) -> None:
        self.rules = RuleModel()

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        if "sub-agent" in last.text:
            args = {"toolkit": "calc", "name": "add", "arguments": {"a": 2, "b": 3}}
            return (tool_call(request, "use_toolkit", args),)
        if "delegate" in last.text:
            goal = {"goal": "add 2 and 3", "toolkit": "calc"}
            return (tool_call(request, "delegate", goal),)
        if not last.text:
            return (TextBlock(text="result: " + last.tool_results[0].content),)
        return self.rules.respond(request)


async def test_delegate_to_a_toolkit_gives_the_child_its_tools_and_the_child_calls_them() -> None:
    clock = FrozenClock()
    agent, provider, _ = _setup(clock, PluginToolkit("calc", [add]), model=ToolkitUser())
    session = agent.session()
    result = await session.send("please delegate the sum")
    assert result.text == "result: result: 5"
    child_task = provider.requests[1]["messages"][-1]["content"][-1]["text"]
    assert "Use the toolkit 'calc' for it." in child_task
    assert "- add: Add two integers." in child_task


async def test_an_unknown_toolkit_is_an_error_the_model_sees() -> None:
    class Wrong(ToolkitUser):
        def respond(self, request: Request) -> tuple[Block, ...]:
            last = request.messages[-1]
            if isinstance(last, UserMessage) and "delegate" in last.text:
                return (tool_call(request, "delegate", {"goal": "x", "toolkit": "nope"}),)
            return super().respond(request)

    clock = FrozenClock()
    agent, _, _ = _setup(clock, PluginToolkit("calc", [add]), model=Wrong())
    result = await agent.session().send("delegate please")
    assert (
        result.text == "result: tool delegate: no connected toolkit named 'nope'; connected: calc"
    )
