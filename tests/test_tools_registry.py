"""Toolsets and the registry: deterministic resolution, clear errors, a generation counter."""

from __future__ import annotations

import itertools

import pytest

from stoker.errors import ToolError
from stoker.tools import Tool, ToolRegistry, Toolset


def _tool(name: str, description: str = "d") -> Tool:
    return Tool.from_schema(name, description, {"type": "object"}, lambda: name)


def _sets() -> list[Toolset]:
    return [
        Toolset(name="files", tools=[_tool("write"), _tool("read")]),
        Toolset(name="memory", tools=[_tool("remember"), _tool("forget")]),
        Toolset(name="web", tools=[_tool("fetch")]),
    ]


def test_duplicate_tool_names_in_a_toolset_raise() -> None:
    with pytest.raises(ToolError, match="defines read more than once"):
        Toolset(name="files", tools=[_tool("read"), _tool("read", "other")])


def test_resolution_is_independent_of_registration_order() -> None:
    orders = [
        [t.spec_bytes for t in ToolRegistry(p).resolve()] for p in itertools.permutations(_sets())
    ]
    names = [t.name for t in ToolRegistry(_sets()).resolve()]
    assert names == ["fetch", "forget", "read", "remember", "write"]
    assert all(order == orders[0] for order in orders)


def test_enabled_and_disabled_toolsets() -> None:
    registry = ToolRegistry(_sets())
    assert [t.name for t in registry.resolve(["web", "files"])] == ["fetch", "read", "write"]
    assert [t.name for t in registry.resolve(disabled=["files"])] == [
        "fetch",
        "forget",
        "remember",
    ]
    assert [t.name for t in registry.resolve(["web", "files"], ["web"])] == ["read", "write"]
    assert registry.resolve([]) == ()


def test_unknown_toolset_raises_listing_known_ones() -> None:
    registry = ToolRegistry(_sets())
    with pytest.raises(ToolError) as info:
        registry.resolve(["files", "mcp"])
    assert str(info.value) == "unknown toolset 'mcp'; known toolsets: files, memory, web"
    with pytest.raises(ToolError, match="unknown toolset 'fles'"):
        registry.resolve(disabled=["fles"])


def test_a_string_instead_of_a_list_of_names_is_refused() -> None:
    with pytest.raises(ToolError, match="not the string 'files'"):
        ToolRegistry(_sets()).resolve("files")


def test_same_name_with_different_definitions_raises() -> None:
    registry = ToolRegistry(
        [Toolset(name="a", tools=[_tool("read")]), Toolset(name="b", tools=[_tool("read", "x")])]
    )
    with pytest.raises(ToolError, match="toolsets 'a' and 'b' both define a tool named 'read'"):
        registry.resolve()
    assert [t.name for t in registry.resolve(["a"])] == ["read"]


def test_same_definition_in_two_toolsets_is_listed_once() -> None:
    shared = _tool("read")
    registry = ToolRegistry(
        [Toolset(name="a", tools=[shared]), Toolset(name="b", tools=[shared, _tool("x")])]
    )
    assert registry.resolve() == (shared, registry.get("b").tools[1])


def test_generation_increments_on_every_change() -> None:
    registry = ToolRegistry()
    seen = [registry.generation]
    registry.register(_sets()[0])
    seen.append(registry.generation)
    with pytest.raises(ToolError, match="already registered"):
        registry.register(_sets()[0])
    seen.append(registry.generation)
    registry.register(_sets()[0], replace=True)
    seen.append(registry.generation)
    registry.unregister("files")
    seen.append(registry.generation)
    assert seen == [0, 1, 1, 2, 3]
    assert registry.names == ()
