"""Plain Python tools as a toolkit, so plugins and MCP servers are used the same way."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stoker.errors import ToolError
from stoker.integrations.errors import ToolCallFailed
from stoker.integrations.toolkit import IntegrationContext, ToolSpec, sorted_specs
from stoker.tools import Tool, Toolset, render_result


class PluginToolkit:
    """A toolkit over `stoker.tools.Tool`s (or a `Toolset`), run in this process.

    Listing never waits on anything, and calls go through each tool's own argument
    check, so a plugin behaves like any toolkit: results are text, failures are
    `ToolCallFailed` with a message for the model.
    """

    __slots__ = ("_specs", "_tools", "name")

    def __init__(self, name: str, tools: Iterable[Tool]) -> None:
        if not isinstance(name, str) or not name:
            raise ToolError(f"a toolkit needs a non-empty name, got {name!r}")
        self.name = name
        self._tools = {t.name: t for t in Toolset(name=name, tools=tuple(tools)).tools}
        self._specs = sorted_specs(
            name,
            (
                ToolSpec(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    gate="approval" if t.risky else None,  # risky tools run once approved
                )
                for t in self._tools.values()
            ),
        )

    @classmethod
    def from_toolset(cls, toolset: Toolset) -> PluginToolkit:
        """The toolset's tools, under the toolset's name."""
        return cls(toolset.name, toolset.tools)

    async def list_tools(self, context: IntegrationContext) -> tuple[ToolSpec, ...]:
        return self._specs

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: IntegrationContext
    ) -> str:
        found = self._tools.get(name)
        if found is None:
            known = ", ".join(sorted(self._tools)) or "(none)"
            raise ToolCallFailed(self.name, name, f"no such tool; its tools: {known}")
        try:
            kwargs = found.validate_arguments(arguments)
        except ValueError as exc:
            raise ToolCallFailed(self.name, name, f"invalid arguments: {exc}") from exc
        try:
            result = await found.invoke(kwargs, context.to_tool_context())
        except Exception as exc:
            raise ToolCallFailed(self.name, name, f"{type(exc).__name__}: {exc}") from exc
        return render_result(result)

    async def close(self) -> None:
        """Nothing to release: the tools live in this process."""
