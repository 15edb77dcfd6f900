"""A stdio MCP server for the integration tests, written with the `mcp` SDK.

Each start reads and bumps a counter in the `--state` file and serves its tools in
another order, never sorted, with the keys of every schema in another order, like a server whose
tool table is a hash map that is rebuilt on reconnect. What it served is appended to
the `--log` file, one JSON line per `tools/list`, so a test can prove the orders
really differed.

Run: python shuffling_server.py --state FILE --log FILE
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "add": (
        "Add two integers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    ),
    "crash": ("Exit the server at once, mid-call.", {"type": "object", "properties": {}}),
    "echo": (
        "Repeat a text, after the prefix in $SHUFFLE_PREFIX.",
        {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to repeat."}},
            "required": ["text"],
        },
    ),
    "fail": ("Always report an error.", {"type": "object", "properties": {}}),
    "slow": (
        "Sleep, then answer.",
        {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}},
    ),
}


def rotated(items: list[str], shift: int) -> list[str]:
    """`items` sorted, then rotated left by `shift`."""
    ordered = sorted(items)
    k = shift % len(ordered) if ordered else 0
    return ordered[k:] + ordered[:k]


def reorder(value: Any, shift: int) -> Any:
    """The same JSON value with every object's keys rotated by `shift`."""
    if isinstance(value, dict):
        return {k: reorder(value[k], shift) for k in rotated(list(value), shift)}
    if isinstance(value, list):
        return [reorder(v, shift) for v in value]
    return value


def build_server(start: int, log: Path) -> Server[Any]:
    """The server as its `start`-th start serves it; each `tools/list` is logged to `log`."""
    shift = start % (len(SCHEMAS) - 1) + 1  # in 1..n-1: no start serves its tools sorted
    order = rotated(list(SCHEMAS), shift)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [
            types.Tool(
                name=n, description=SCHEMAS[n][0], input_schema=reorder(SCHEMAS[n][1], shift)
            )
            for n in order
        ]
        served = {"names": order, "keys": [list(t.input_schema) for t in tools]}
        with log.open("a") as fh:
            fh.write(json.dumps(served) + "\n")
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "echo":
            text = os.environ.get("SHUFFLE_PREFIX", "") + str(args["text"])
        elif params.name == "add":
            text = str(int(args["a"]) + int(args["b"]))
        elif params.name == "crash":
            os._exit(1)
        elif params.name == "slow":
            await anyio.sleep(float(args.get("seconds", 5)))
            text = "done"
        else:
            failure = "it failed, as asked" if params.name == "fail" else "no such tool"
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=failure)], is_error=True
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("shuffling", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    options = parser.parse_args()
    start = int(options.state.read_text() or "0") if options.state.exists() else 0
    options.state.write_text(str(start + 1))
    server = build_server(start, options.log)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
