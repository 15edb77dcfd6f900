"""A named group of tools: the unit that is enabled, disabled and registered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stoker.errors import ToolError
from stoker.tools.tool import Tool


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolset:
    """Tools that are switched on and off together (a workspace, an MCP server, memory).

    `tools` may be any sequence; it is kept as a tuple in the given order (the registry
    sorts by name when it resolves, so the order here never reaches the wire).
    """

    name: str
    tools: Sequence[Tool] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ToolError(f"a toolset needs a non-empty name, got {self.name!r}")
        tools = tuple(self.tools)
        for t in tools:
            if not isinstance(t, Tool):
                raise ToolError(
                    f"toolset {self.name!r}: {t!r} is not a Tool; decorate it with @tool"
                )
        names = [t.name for t in tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ToolError(
                f"toolset {self.name!r} defines {', '.join(duplicates)} more than once; "
                "a tool name must be unique"
            )
        object.__setattr__(self, "tools", tools)

    @property
    def names(self) -> tuple[str, ...]:
        """The tool names, sorted."""
        return tuple(sorted(t.name for t in self.tools))
