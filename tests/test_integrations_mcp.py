"""MCP toolkits against real servers written with the `mcp` SDK: stdio subprocesses,
and a streamable-HTTP server run in-process on 127.0.0.1 (no other network)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker.integrations import (
    IntegrationContext,
    IntegrationTimeout,
    McpHttp,
    McpStdio,
    McpToolkit,
    ToolCallFailed,
    ToolkitCache,
    ToolkitRegistry,
    ToolkitUnavailable,
    ToolkitView,
    describe_change,
)
from tests.mcp_servers import hanging_stdio, serving_http, shuffling_stdio, unused_port

CTX = IntegrationContext(session_id="s1")


@pytest.fixture
async def closing() -> AsyncIterator[list[McpToolkit]]:
    """Toolkits a test made, closed at its end even when it fails."""
    made: list[McpToolkit] = []
    yield made
    for toolkit in made:
        await toolkit.close()


def served(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_mcp_reconnect_in_different_order_leaves_tool_bytes_unchanged(
    tmp_path: Path, closing: list[McpToolkit]
) -> None:
    toolkit = McpToolkit("shuffled", shuffling_stdio(tmp_path))
    closing.append(toolkit)
    registry = ToolkitRegistry([toolkit])
    cache = ToolkitCache()

    first = await registry.view(cache, CTX)
    await toolkit.close()
    cache.invalidate("shuffled")
    second = await registry.view(cache, CTX)

    raw = served(tmp_path / "log")
    assert len(raw) == 2  # two connections, one listing each
    names = sorted(raw[0]["names"])
    assert names not in (raw[0]["names"], raw[1]["names"])  # neither listing came sorted,
    assert raw[0]["names"] != raw[1]["names"]  # the server really reordered its tools...
    assert raw[0]["keys"] != raw[1]["keys"]  # ...and the keys of its schemas
    assert second.view_bytes() == first.view_bytes()
    assert second.fingerprint == first.fingerprint
    assert describe_change(first, second) == ""
    assert first.names == ("shuffled",)
    assert [s.name for s in first.toolkits["shuffled"]] == ["add", "crash", "echo", "fail", "slow"]
    assert cache.fetch_count("shuffled") == 2


async def test_mcp_stdio_calls_run_end_to_end_over_one_shared_connection(
    tmp_path: Path, closing: list[McpToolkit]
) -> None:
    toolkit = McpToolkit("calc", shuffling_stdio(tmp_path, SHUFFLE_PREFIX="calc says: "))
    closing.append(toolkit)
    registry = ToolkitRegistry([toolkit])

    concurrent_first_calls = await asyncio.gather(
        *(registry.call("calc", "add", {"a": i, "b": i}, CTX) for i in range(3))
    )
    assert concurrent_first_calls == ["0", "2", "4"]
    assert await registry.call("calc", "echo", {"text": "hi"}, CTX) == "calc says: hi"
    with pytest.raises(ToolCallFailed) as failed:
        await registry.call("calc", "fail", {}, CTX)
    assert str(failed.value) == "toolkit 'calc', tool 'fail': it failed, as asked"
    assert (tmp_path / "starts").read_text() == "1"  # one connection served every call


async def test_a_missing_server_command_fails_at_once_with_a_clear_error() -> None:
    toolkit = McpToolkit("ghost", McpStdio(command="/nonexistent/mcp-server"), timeout=1.0)
    loop = asyncio.get_running_loop()
    started = loop.time()

    with pytest.raises(ToolkitUnavailable) as down:
        await toolkit.list_tools(CTX)
    await toolkit.close()

    assert loop.time() - started < 1.0
    assert str(down.value) == (
        "toolkit 'ghost' is unavailable (connect): the server command was not found "
        "(/nonexistent/mcp-server); check the command, and run it by hand to see its errors. "
        "Try again later or carry on without it; it reconnects on its next use."
    )


async def test_a_server_that_never_answers_fails_within_the_timeout(
    closing: list[McpToolkit],
) -> None:
    toolkit = McpToolkit("stuck", hanging_stdio(), timeout=1.0)
    closing.append(toolkit)
    registry = ToolkitRegistry([toolkit])
    cache = ToolkitCache()
    loop = asyncio.get_running_loop()
    started = loop.time()

    outcome, view = await asyncio.gather(
        registry.call("stuck", "anything", {}, CTX),
        registry.view(cache, CTX),  # waits on the same connection attempt
        return_exceptions=True,
    )

    assert loop.time() - started < 2.0  # one timeout of 1 s, not a hung turn
    assert isinstance(outcome, IntegrationTimeout)
    assert str(outcome).startswith("toolkit 'stuck' is unavailable (connect): no answer within 1 s")
    assert isinstance(view, ToolkitView)
    assert (view.authoritative, view.missing) == (False, ("stuck",))


async def test_a_call_past_the_timeout_is_abandoned_and_the_next_call_reconnects(
    tmp_path: Path, closing: list[McpToolkit]
) -> None:
    toolkit = McpToolkit("calc", shuffling_stdio(tmp_path), timeout=1.0, connect_timeout=10.0)
    closing.append(toolkit)
    assert await toolkit.call_tool("add", {"a": 1, "b": 2}, CTX) == "3"

    with pytest.raises(IntegrationTimeout, match=r"\(call 'slow'\): no answer within 1 s"):
        await toolkit.call_tool("slow", {"seconds": 30}, CTX)
    assert await toolkit.call_tool("add", {"a": 2, "b": 2}, CTX) == "4"

    assert (tmp_path / "starts").read_text() == "2"


async def test_a_server_that_dies_fails_one_call_and_the_next_call_reconnects(
    tmp_path: Path, closing: list[McpToolkit]
) -> None:
    toolkit = McpToolkit("calc", shuffling_stdio(tmp_path))
    closing.append(toolkit)

    with pytest.raises(ToolkitUnavailable, match=r"\(call 'crash'\): MCPError: Connection closed"):
        await toolkit.call_tool("crash", {}, CTX)
    assert await toolkit.call_tool("add", {"a": 2, "b": 2}, CTX) == "4"

    assert (tmp_path / "starts").read_text() == "2"


# -- streamable HTTP, in-process ---------------------------------------------------------


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    with serving_http(tmp_path / "log", token="t0ken") as url:
        yield url


async def test_mcp_streamable_http_sends_headers_lists_and_calls(
    http_server: str, closing: list[McpToolkit]
) -> None:
    toolkit = McpToolkit("web", McpHttp(url=http_server, headers={"Authorization": "Bearer t0ken"}))
    anonymous = McpToolkit("anon", McpHttp(url=http_server), timeout=5.0)
    closing.extend([toolkit, anonymous])

    specs = await toolkit.list_tools(CTX)
    assert [s.name for s in specs] == ["add", "crash", "echo", "fail", "slow"]
    assert await toolkit.call_tool("add", {"a": 5, "b": 6}, CTX) == "11"
    with pytest.raises(ToolkitUnavailable, match=r"'anon' is unavailable \(connect\)"):
        await anonymous.list_tools(CTX)


async def test_an_http_server_that_is_down_fails_at_once() -> None:
    url = f"http://127.0.0.1:{unused_port()}/mcp"
    toolkit = McpToolkit("down", McpHttp(url=url), timeout=5.0)
    loop = asyncio.get_running_loop()
    started = loop.time()

    with pytest.raises(ToolkitUnavailable, match="ConnectError"):
        await toolkit.list_tools(CTX)
    await toolkit.close()

    assert loop.time() - started < 5.0
