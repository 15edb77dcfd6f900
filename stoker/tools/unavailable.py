"""A stand-in for a tool the prefix advertises but this runtime cannot run now.

A session's `tools[]` is frozen bytes; the implementations behind them come from the
registry of whichever process serves the session. When a toolset is not registered
there (its server is down, a replica started without it), dropping its tools from the
request would move the prefix and cost a full rewrite, twice: once when it goes, once
when it comes back. So the bytes stay, and a call to one of those tools runs this
stand-in, whose error the model reads and works around.
"""

from __future__ import annotations

import json
from typing import Any

from stoker.errors import ToolError, ToolUnavailable
from stoker.tools.tool import Tool


def unavailable_tool(spec_bytes: bytes) -> Tool:
    """A tool that sends exactly `spec_bytes` (a `Tool.spec_bytes` as stored in a prefix)
    and answers every call with `ToolUnavailable`, whatever its arguments.

    Its `spec_bytes` equal the given ones, so a rebase may carry it into a new prefix.
    """
    try:
        spec = json.loads(spec_bytes)
        name = spec["name"]
        description = spec["description"]
        schema = spec["input_schema"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"not a tool spec: {spec_bytes[:80]!r}") from exc

    async def unavailable(**_: Any) -> str:
        raise ToolUnavailable(name)

    stand_in = Tool(
        name=name,
        description=description,
        input_schema=schema,
        fn=unavailable,
        validator=lambda _arguments: {},  # whatever was sent, the answer is the same
    )
    if stand_in.spec_bytes != spec_bytes:
        raise ToolError(f"tool {name}: its stored spec is not canonical JSON; cannot stand in")
    return stand_in
