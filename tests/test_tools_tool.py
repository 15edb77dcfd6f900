"""The Tool value and @tool: schemas from hints and docstrings, byte-stable specs, names."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

import stoker.tools
from stoker.errors import ToolError
from stoker.tools import Tool, ToolContext, tool

TOOLS_DIR = Path(stoker.tools.__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parents[1]


def test_schema_from_hints_and_docstring() -> None:
    @tool
    def find(pattern: str, limit: int = 10, kinds: list[Literal["file", "dir"]] | None = None):
        """Find entries whose name matches a pattern.

        This second paragraph explains more and is not part of the description.

        Args:
            pattern: Glob pattern,
                matched against base names.
            limit (int): Most results to return.
            kinds: Only entries of these kinds.

        Returns:
            One path per line.
        """

    assert find.name == "find"
    assert find.description == "Find entries whose name matches a pattern."
    assert find.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Glob pattern, matched against base names.",
            },
            "limit": {"type": "integer", "default": 10, "description": "Most results to return."},
            "kinds": {
                "anyOf": [
                    {"type": "array", "items": {"type": "string", "enum": ["file", "dir"]}},
                    {"type": "null"},
                ],
                "default": None,
                "description": "Only entries of these kinds.",
            },
        },
        "required": ["pattern"],
    }


def test_spec_bytes_are_canonical_json_of_name_description_schema() -> None:
    @tool(name="echo-v2", description="Say it back.", risky=True, concurrent=False)
    async def echo(text: str) -> str:
        return text

    expected = {
        "name": "echo-v2",
        "description": "Say it back.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    }
    assert echo.spec_bytes == json.dumps(expected, sort_keys=True, separators=(",", ":")).encode()
    assert (echo.risky, echo.concurrent) == (True, False)


def test_titles_are_stripped_but_a_property_named_title_is_kept() -> None:
    @tool
    def rename(title: str, meta: dict[str, str] | None = None) -> str:
        """Rename."""
        return title

    assert b'"title":{' in rename.spec_bytes
    assert rename.input_schema["properties"]["title"] == {"type": "string"}
    assert b'"title":"' not in rename.spec_bytes


SCHEMA_PROGRAM = """
from __future__ import annotations
import sys
from typing import Literal
from stoker.tools import tool

@tool
def plan(
    goal: str,
    tags: set[str],
    weights: dict[str, float],
    labels: frozenset[str] = frozenset({"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}),
    mode: Literal["fast", "careful"] = "careful",
    options: dict[str, int] = {"retries": 2, "depth": 3, "width": 1},
    groups: dict[str, frozenset[str]] = {"team": frozenset({"ann", "bob", "cy", "dee", "eve"})},
    mixed: frozenset[int | str] = frozenset({3, "x", "y", "z", 1}),
) -> str:
    '''Plan the work.

    Args:
        goal: What to achieve.
        tags: Labels to attach.
        weights: Weight per criterion.
    '''
    return goal

sys.stdout.buffer.write(plan.spec_bytes)
"""


def _spec_in_subprocess(hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCHEMA_PROGRAM],
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def test_tool_schema_bytes_identical_across_processes() -> None:
    first, second = _spec_in_subprocess("1"), _spec_in_subprocess("2")
    assert first == second
    properties = json.loads(first)["input_schema"]["properties"]
    # Set-valued defaults, nested or of mixed types, are written sorted (by their JSON).
    assert properties["labels"]["default"] == ["alpha", "beta", "delta", "epsilon", "gamma", "zeta"]
    assert properties["groups"]["default"] == {"team": ["ann", "bob", "cy", "dee", "eve"]}
    assert properties["mixed"]["default"] == ["x", "y", "z", 1, 3]


def test_context_parameter_is_injected_and_not_in_schema() -> None:
    @tool
    def whoami(ctx: ToolContext, loud: bool = False) -> str:
        """Say which session this is."""
        return ctx.session_id

    assert whoami.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {"loud": {"type": "boolean", "default": False}},
    }
    assert whoami.context_param == "ctx"


@pytest.mark.parametrize("bad", ["", "has space", "dots.are.bad", "ü", "x" * 65])
def test_invalid_tool_name_raises_tool_error(bad: str) -> None:
    def fn() -> str:
        return ""

    with pytest.raises(ToolError, match="invalid tool name"):
        tool(name=bad)(fn)
    with pytest.raises(ToolError, match="invalid tool name"):
        Tool.from_schema(bad, "d", {"type": "object"}, fn)


def test_sixty_four_character_name_is_accepted() -> None:
    assert Tool.from_schema("a" * 64, "d", {"type": "object"}, lambda: "").name == "a" * 64


def test_badly_defined_functions_raise_tool_error() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def star(*args: str) -> str:
        return ""

    with pytest.raises(ToolError, match="has no type hint"):
        tool(untyped)
    with pytest.raises(ToolError, match="keyword arguments only"):
        tool(star)
    with pytest.raises(ToolError, match='"type": "object"'):
        Tool.from_schema("s", "d", {"type": "string"}, star)


def test_from_schema_keeps_schema_and_detects_context() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    def search(ctx: ToolContext, **arguments: object) -> str:
        return str(arguments)

    made = Tool.from_schema("search", "Search.", schema, search)
    assert made.input_schema == schema
    assert made.context_param == "ctx"
    assert made.validate_arguments({"q": "x"}) == {"q": "x"}
    with pytest.raises(ValueError, match="q: Field required"):
        made.validate_arguments({})
    with pytest.raises(ValueError, match="expected a JSON object"):
        made.validate_arguments(["q"])


def test_equal_definitions_compare_equal_whatever_the_callable() -> None:
    one = Tool.from_schema("t", "d", {"type": "object"}, lambda: "1")
    two = Tool.from_schema("t", "d", {"type": "object"}, lambda: "2")
    assert one == two
    assert hash(one) == hash(two)
    assert one != Tool.from_schema("t", "d", {"type": "object"}, lambda: "1", risky=True)


def test_tools_package_imports_only_errors_and_wire() -> None:
    bad = []
    for path in sorted(TOOLS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                allowed = ("stoker.errors", "stoker.wire", "stoker.tools")
                if name.startswith("stoker") and not name.startswith(allowed):
                    bad.append(f"{path.name}: {name}")
    assert bad == []


def test_all_is_sorted_and_complete() -> None:
    assert stoker.tools.__all__ == sorted(stoker.tools.__all__)
    assert all(hasattr(stoker.tools, name) for name in stoker.tools.__all__)
