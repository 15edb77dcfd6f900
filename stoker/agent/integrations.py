"""Toolkits (MCP servers, plugins) in a session, without ever touching tools[].

Two tools with fixed schemas reach every toolkit: `use_toolkit` calls one of a toolkit's
tools, and `delegate` hands a task to a sub-agent that should use a toolkit. Which
toolkits exist is told to the model in a note in the newest user message, at turn
boundaries, whenever the session's view of them changes. A session created while the
shared cache is warm already knows its view (prewarm): its first turn fetches nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stoker.errors import ToolError
from stoker.integrations import (
    IntegrationContext,
    ToolkitCache,
    ToolkitRegistry,
    ToolkitView,
    ToolSpec,
    describe_change,
)
from stoker.tools import Tool, ToolContext, tool

USE_TOOLKIT = "use_toolkit"
_GATE_NOTE = {
    "approval": " (runs only once the user approves the call)",
    "connection": " (cannot run until the user connects an account)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Integrations:
    """The toolkit registry and the process-wide cache of their tool lists."""

    registry: ToolkitRegistry
    cache: ToolkitCache

    def spec(self, toolkit: str, name: str) -> ToolSpec | None:
        """What the toolkit's fresh listing says of its tool `name` (None: not listed, or
        no fresh listing; the toolkit itself then decides)."""
        snapshot = self.cache.peek(toolkit)
        if snapshot is None:
            return None
        return next((s for s in snapshot.tools if s.name == name), None)


def use_toolkit_tool(integrations: Integrations) -> Tool:
    """`use_toolkit`: one schema for every toolkit, so connecting one changes no bytes."""

    @tool(name=USE_TOOLKIT)
    async def use_toolkit(
        toolkit: str, name: str, arguments: dict[str, Any] | None = None, *, context: ToolContext
    ) -> str:
        """Call a tool of a connected toolkit. The conversation says which toolkits are
        connected and lists their tools when they connect or change.

        Args:
            toolkit: The toolkit's name.
            name: The name of the toolkit's tool.
            arguments: The tool's arguments, as its schema asks.
        """
        spec = integrations.spec(toolkit, name)
        if spec is not None and spec.gate == "connection":
            raise ToolError(
                f"{name} of toolkit {toolkit!r} waits for the user to connect an account, "
                f"so it did not run; ask the user to connect {toolkit}, then try again"
            )
        return await integrations.registry.call(
            toolkit, name, arguments or {}, IntegrationContext.from_tool_context(context)
        )

    def gated(arguments: Mapping[str, Any]) -> bool:
        spec = integrations.spec(str(arguments.get("toolkit")), str(arguments.get("name")))
        return spec is not None and spec.gate == "approval"

    return replace(use_toolkit, asks=gated)


class ToolkitTracker:
    """What a session has told the model about its toolkits, and what to tell it next."""

    def __init__(self, integrations: Integrations, *, announced: ToolkitView | None = None) -> None:
        self.integrations = integrations
        self.announced = announced or ToolkitView()
        self._prewarmed: ToolkitView | None = integrations.registry.prewarm(integrations.cache)

    @property
    def prewarmed_authoritative(self) -> bool:
        return self._prewarmed is not None and self._prewarmed.authoritative

    def child(self) -> ToolkitTracker:
        """A tracker for a fork or sub-agent: it already knows what the parent announced."""
        return ToolkitTracker(self.integrations, announced=self.announced)

    async def turn_note(self, session_id: str) -> str:
        """The note for the next user message ("" when nothing changed). Uses the prewarmed
        view on the first turn when it is authoritative; otherwise reads the cache and
        fetches only what is missing or expired."""
        if self._prewarmed is not None and self._prewarmed.authoritative:
            view = self._prewarmed
        else:
            ctx = IntegrationContext(session_id=session_id)
            view = await self.integrations.registry.view(self.integrations.cache, ctx)
        self._prewarmed = None
        note = describe_change(self.announced, view)
        self.announced = view
        return note

    def brief(self, toolkit: str) -> str:
        """The toolkit's tools, for a sub-agent's task message."""
        specs = self.announced.toolkits.get(toolkit)
        if specs is None:
            known = ", ".join(self.announced.names) or "(none)"
            raise ToolError(f"no connected toolkit named {toolkit!r}; connected: {known}")
        lines = [
            f"- {s.name}{_GATE_NOTE.get(s.gate or '', '')}: {s.description} Arguments schema: "
            + json.dumps(s.input_schema, sort_keys=True, ensure_ascii=False)
            for s in specs
        ]
        return (
            f"Call its tools with use_toolkit(toolkit={toolkit!r}, name=..., arguments=...):\n"
            + "\n".join(lines)
        )
