"""The `Toolkit` seam, the `ToolSpec` value it lists, and the context it is called with.

A toolkit is a source of tools that can come and go at runtime: an MCP server, a
plugin. Its tools never enter the request's `tools[]` directly (that would change the
prefix whenever a server connects: docs/cache-breakers.md, "Per-turn tool lists"); they
are reached through a fixed tool such as `delegate`, and described to the model in
notes. What a toolkit lists must still be byte-stable, because those notes and the
session's toolkit fingerprint are built from it: `sorted_specs` sorts by name and every
`ToolSpec` holds a key-sorted copy of its schema, so a server that answers in another
order after a reconnect changes nothing (docs/cache-breakers.md, "Tool order" and "JSON
key order and whitespace").
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from stoker.errors import ToolError
from stoker.tools import ToolContext
from stoker.wire.canonical import canonical_json


@dataclass(frozen=True, slots=True, kw_only=True)
class IntegrationContext:
    """Who a toolkit operation is for.

    Every field has a default because listing tools happens at session build, before
    any tool call exists. A tool list is cached process-wide and shared by sessions,
    so a toolkit must not vary its list by context; the context is for calls (audit,
    per-session credentials) and logs.
    """

    session_id: str = ""
    tool_use_id: str = ""
    run_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @classmethod
    def from_tool_context(cls, context: ToolContext) -> IntegrationContext:
        """The context of a toolkit call made from inside a tool (the delegate tool)."""
        return cls(
            session_id=context.session_id,
            tool_use_id=context.tool_use_id,
            run_id=context.run_id,
            metadata=context.metadata,
        )

    def to_tool_context(self) -> ToolContext:
        """The context a plain `Tool` run by a plugin toolkit receives."""
        return ToolContext(
            session_id=self.session_id,
            tool_use_id=self.tool_use_id,
            run_id=self.run_id,
            metadata=self.metadata,
        )


Gate = Literal["approval", "connection"]
GATES: tuple[Gate, ...] = ("approval", "connection")
LINE_CHARS = 120
"""The longest one-line description a catalogue entry shows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """One tool as a toolkit describes it: name, description, input schema, gate.

    `input_schema` is replaced by its canonical copy (keys sorted at every depth) and
    `spec_bytes` is computed once from it; treat the dict as read-only. Names are not
    checked against provider rules: toolkit tools are called through a fixed tool,
    never sent in `tools[]` under their own names.

    `gate` puts the tool in its toolkit's catalogue of gated actions instead of among
    the tools it may call freely: "approval" runs each call only once the user approves
    it (a plugin's risky tools, an MCP tool annotated destructive), "connection" cannot
    run until the user connects the account it acts on. The model is told the catalogue
    with the tools, so it can offer what it cannot do unasked.
    """

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"}, hash=False)
    gate: Gate | None = None
    spec_bytes: bytes = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ToolError(f"a toolkit tool needs a non-empty name, got {self.name!r}")
        if not isinstance(self.description, str):
            raise ToolError(f"toolkit tool {self.name!r}: description must be a str")
        if not isinstance(self.input_schema, dict):
            raise ToolError(f"toolkit tool {self.name!r}: input_schema must be a JSON object")
        if self.gate is not None and self.gate not in GATES:
            raise ToolError(
                f"toolkit tool {self.name!r}: gate must be one of {', '.join(GATES)} "
                f"or None, not {self.gate!r}"
            )
        spec: dict[str, Any] = {
            "description": self.description,
            "input_schema": self.input_schema,
            "name": self.name,
        }
        if self.gate is not None:  # absent when open: views from before gates keep their bytes
            spec["gate"] = self.gate
        try:
            spec_bytes = canonical_json(spec)
        except (TypeError, ValueError) as exc:
            raise ToolError(
                f"toolkit tool {self.name!r}: input_schema is not plain JSON: {exc}"
            ) from exc
        object.__setattr__(self, "input_schema", json.loads(spec_bytes)["input_schema"])
        object.__setattr__(self, "spec_bytes", spec_bytes)

    @property
    def line(self) -> str:
        """The description's first line, cut to `LINE_CHARS`: what a catalogue shows."""
        first = self.description.strip().split("\n", 1)[0].strip()
        return first if len(first) <= LINE_CHARS else first[: LINE_CHARS - 1] + "…"


def specs_bytes(specs: Iterable[ToolSpec]) -> bytes:
    """Canonical JSON of a list of specs, equal to `canonical_json([...])` of their dicts."""
    return b"[" + b",".join(s.spec_bytes for s in specs) + b"]"


def sorted_specs(toolkit: str, specs: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    """`specs` sorted by name; two tools with one name fail, since a call could not
    tell them apart. Every tool list that leaves a toolkit goes through here."""
    given = tuple(specs)
    for spec in given:
        if not isinstance(spec, ToolSpec):
            raise ToolError(f"toolkit {toolkit!r} listed {spec!r}, which is not a ToolSpec")
    out = tuple(sorted(given, key=lambda s: s.name))
    dupes = sorted({a.name for a, b in itertools.pairwise(out) if a.name == b.name})
    if dupes:
        raise ToolError(f"toolkit {toolkit!r} lists {', '.join(dupes)} more than once")
    return out


@runtime_checkable
class Toolkit(Protocol):
    """A named, connectable source of tools.

    `list_tools` may return tools in any order (callers sort them with
    `sorted_specs`); `call_tool` returns the result text or raises an
    `IntegrationError`. Every operation must end in bounded time: a toolkit that
    waits on a network bounds each wait itself. `close` releases connections; a
    closed toolkit may be used again (it reconnects).
    """

    @property
    def name(self) -> str: ...

    async def list_tools(self, context: IntegrationContext) -> tuple[ToolSpec, ...]: ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: IntegrationContext
    ) -> str: ...

    async def close(self) -> None: ...
