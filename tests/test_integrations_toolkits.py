"""The Toolkit contract, run against every implementation, and the pieces around it:
`ToolSpec`, `PluginToolkit`, `ToolkitRegistry.call`, and how a toolkit failure reaches
the model through the tool dispatcher."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from stoker.errors import ToolError
from stoker.integrations import (
    IntegrationContext,
    IntegrationTimeout,
    McpHttp,
    McpToolkit,
    PluginToolkit,
    ToolCallFailed,
    Toolkit,
    ToolkitRegistry,
    ToolSpec,
    UnknownToolkit,
    sorted_specs,
)
from stoker.tools import Tool, ToolContext, Toolset, run_tool_calls, tool
from stoker.wire.blocks import ToolUseBlock
from tests.mcp_servers import serving_http, shuffling_stdio

CTX = IntegrationContext(session_id="s1", tool_use_id="call-1")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Repeat a text."""
    return text


@tool
def fail() -> str:
    """Always fail."""
    raise RuntimeError("it failed, as asked")


@tool
def whoami(context: ToolContext) -> str:
    """Say which session and call this is."""
    return f"{context.session_id}/{context.tool_use_id}"


# -- the contract every toolkit passes ---------------------------------------------------


@pytest.fixture(params=["plugin", "mcp-stdio", "mcp-http"])
async def toolkit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Toolkit]:
    with ExitStack() as stack:
        if request.param == "plugin":
            made: Toolkit = PluginToolkit("calc", [echo, fail, add])
        elif request.param == "mcp-stdio":
            made = McpToolkit("calc", shuffling_stdio(tmp_path))
        else:
            url = stack.enter_context(serving_http(tmp_path / "log", token="t"))
            made = McpToolkit("calc", McpHttp(url=url, headers={"Authorization": "Bearer t"}))
        yield made
        await made.close()


async def test_contract_lists_sorted_canonical_specs(toolkit: Toolkit) -> None:
    specs = await toolkit.list_tools(CTX)

    assert isinstance(toolkit, Toolkit)
    assert specs == sorted_specs(toolkit.name, specs)
    assert {"add", "echo", "fail"} <= {s.name for s in specs}
    for s in specs:
        assert s.spec_bytes.startswith(b'{"description":')
        assert list(s.input_schema) == sorted(s.input_schema)


async def test_contract_calls_return_text_and_failures_raise_for_the_model(
    toolkit: Toolkit,
) -> None:
    assert await toolkit.call_tool("add", {"a": 2, "b": 3}, CTX) == "5"
    assert await toolkit.call_tool("echo", {"text": "héllo"}, CTX) == "héllo"
    with pytest.raises(ToolCallFailed, match="it failed, as asked") as failed:
        await toolkit.call_tool("fail", {}, CTX)
    with pytest.raises(ToolCallFailed, match="'nope'"):
        await toolkit.call_tool("nope", {}, CTX)
    assert (failed.value.toolkit, failed.value.tool) == ("calc", "fail")


async def test_contract_a_closed_toolkit_can_be_used_again(toolkit: Toolkit) -> None:
    before = await toolkit.list_tools(CTX)
    await toolkit.close()

    assert await toolkit.list_tools(CTX) == before
    assert await toolkit.call_tool("add", {"a": 1, "b": 1}, CTX) == "2"


# -- ToolSpec and plugins ------------------------------------------------------------------


def test_tool_spec_keeps_a_key_sorted_copy_of_its_schema() -> None:
    schema = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}
    made = ToolSpec(name="t", description="d", input_schema=schema)
    schema["type"] = "changed"

    assert made.spec_bytes == (
        b'{"description":"d","input_schema":{"properties":{"a":{"type":"integer"},'
        b'"b":{"type":"string"}},"type":"object"},"name":"t"}'
    )
    assert list(made.input_schema["properties"]) == ["a", "b"]
    with pytest.raises(ToolError, match="not plain JSON"):
        ToolSpec(name="t", input_schema={"default": float("nan")})


def test_sorted_specs_rejects_two_tools_with_one_name() -> None:
    with pytest.raises(ToolError, match="lists dup more than once"):
        sorted_specs("k", [ToolSpec(name="dup"), ToolSpec(name="x"), ToolSpec(name="dup")])


async def test_plugin_tools_get_the_call_context_and_argument_checks() -> None:
    plugin = PluginToolkit("me", [whoami, add])

    assert await plugin.call_tool("whoami", {}, CTX) == "s1/call-1"
    with pytest.raises(ToolCallFailed, match="invalid arguments"):
        await plugin.call_tool("add", {"a": 1}, CTX)
    assert [s.name for s in await plugin.list_tools(CTX)] == ["add", "whoami"]
    from_set = PluginToolkit.from_toolset(Toolset(name="calc", tools=[echo, add]))
    assert (from_set.name, [s.name for s in await from_set.list_tools(CTX)]) == (
        "calc",
        ["add", "echo"],
    )


# -- routing calls ---------------------------------------------------------------------------


async def test_registry_call_routes_and_names_unknown_toolkits() -> None:
    registry = ToolkitRegistry([PluginToolkit("calc", [add]), PluginToolkit("text", [echo])])

    assert await registry.call("calc", "add", {"a": 1, "b": 2}, CTX) == "3"
    with pytest.raises(UnknownToolkit) as unknown:
        await registry.call("jira", "search", {}, CTX)
    assert str(unknown.value) == "no toolkit is named 'jira'; available toolkits: 'calc', 'text'"


async def test_registry_call_bounds_a_toolkit_that_hangs() -> None:
    class Hanging(PluginToolkit):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any) -> str:
            await asyncio.sleep(60)
            return "never"

    registry = ToolkitRegistry([Hanging("stuck", [echo])], call_timeout=0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()

    with pytest.raises(IntegrationTimeout, match="'stuck' is unavailable") as timed_out:
        await registry.call("stuck", "echo", {"text": "x"}, CTX)

    assert loop.time() - started < 1.0
    assert timed_out.value.timeout == 0.05


async def test_a_toolkit_failure_reaches_the_model_as_a_tool_error() -> None:
    registry = ToolkitRegistry([PluginToolkit("calc", [fail])])

    async def use_toolkit(toolkit: str, tool_name: str, context: ToolContext) -> str:
        ctx = IntegrationContext.from_tool_context(context)
        return await registry.call(toolkit, tool_name, {}, ctx)

    via = Tool.from_schema(
        "use_toolkit",
        "Call a toolkit tool.",
        {
            "type": "object",
            "properties": {"toolkit": {"type": "string"}, "tool_name": {"type": "string"}},
            "required": ["toolkit", "tool_name"],
        },
        use_toolkit,
    )
    calls = [
        ToolUseBlock(
            id="t1", name="use_toolkit", input_json='{"toolkit":"calc","tool_name":"fail"}'
        ),
        ToolUseBlock(id="t2", name="use_toolkit", input_json='{"toolkit":"web","tool_name":"get"}'),
    ]

    results = await run_tool_calls(
        calls,
        {"use_toolkit": via},
        context_factory=lambda c: ToolContext(session_id="s1", tool_use_id=c.id),
    )

    assert [(r.is_error, r.content) for r in results] == [
        (
            True,
            "tool use_toolkit: toolkit 'calc', tool 'fail': RuntimeError: it failed, as asked",
        ),
        (
            True,
            "tool use_toolkit: no toolkit is named 'web'; available toolkits: 'calc'",
        ),
    ]


def test_the_package_exports_exactly_its_public_names() -> None:
    import importlib
    import inspect

    import stoker.integrations as package

    modules = ["cache", "errors", "mcp", "plugin", "registry", "toolkit", "view"]
    public = {
        attr
        for module in modules
        for attr, obj in vars(importlib.import_module(f"stoker.integrations.{module}")).items()
        if not attr.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == f"stoker.integrations.{module}"
    }

    assert sorted(package.__all__, key=lambda n: (not n[:1].isupper(), n)) == package.__all__
    assert set(package.__all__) == public
