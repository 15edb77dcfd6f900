"""Dependencies point one way: a lower layer never imports a higher one, and no cycles.

Walks each module's module-level imports with `ast`. Imports under `if TYPE_CHECKING:`
count as edges too: hiding a cycle from the interpreter does not hide it from a reader.
Imports inside functions are the edges' own business (the CLI uses them to start fast),
except for cycles: an import inside a function still closes one.

`docs/architecture.md` draws the layers as a table; it must equal `LAYERS`, and every
module it names must exist, so the page cannot drift from the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import stoker

ROOT = Path(stoker.__file__).parent
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"

# Lower number = lower layer. A module may import its own package or any lower layer.
LAYERS = {
    "errors": 0,
    "extras": 1,  # which extra brings what: above errors, below everything that needs one
    "clock": 0,
    "lifecycle": 0,
    "config": 0,
    "wire": 1,
    "tools": 2,
    "cache": 3,
    "toolsets": 3,
    "integrations": 3,
    "memory": 3,
    "http_server": 3,  # below providers: the simulator's server (layer 4) starts through it
    "providers": 4,
    "agent": 5,
    "testing": 6,
    "store": 6,
    "demo": 7,
    "run": 7,
    "session_views": 7,
    "session_ids": 7,
    "report": 7,
    "gateway": 8,
    "proxy": 8,
    "audit": 8,
    "platforms": 9,  # above the gateway: its bridges run as the gateway app's companions
    "bench": 9,  # drives the gateway and the proxy, in process or as children
    "cli": 10,
    "__init__": 11,
    "__main__": 11,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.Module, module: str, is_package: bool, *, inner: bool = False) -> set[str]:
    """The stoker modules `tree` imports at module level (type-only imports included);
    with `inner`, also those imported inside functions."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    name = ".".join([*base, node.module] if node.module else base)
                else:
                    name = node.module or ""
                found.add(name)
                found.update(f"{name}.{a.name}" for a in node.names)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    if inner:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body)
    return {n for n in found if n == "stoker" or n.startswith("stoker.")}


def _graph(*, inner: bool = False) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = _imports(tree, name, path.name == "__init__.py", inner=inner)
        graph[name] = {i for i in imports if i in modules and i != name}
    return graph


def _layer(module: str) -> tuple[str, int]:
    top = module.split(".")[1] if "." in module else "__init__"
    assert top in LAYERS, f"module {module} is in no layer; add {top!r} to LAYERS"
    return top, LAYERS[top]


def test_no_upward_imports() -> None:
    bad = []
    for module, imports in _graph().items():
        top, rank = _layer(module)
        for imported in imports:
            itop, irank = _layer(imported)
            if itop != top and irank >= rank:
                bad.append(f"{module} (layer {top}={rank}) imports {imported} ({itop}={irank})")
    assert bad == []


def test_the_gateway_never_imports_the_platforms() -> None:
    """Not even inside a function: the platforms run beside the gateway as companions of
    its app, and only whoever composes the process (`stoker serve`) knows both."""
    bad = [
        f"{module} imports {imported}"
        for module, imports in _graph(inner=True).items()
        if module.startswith("stoker.gateway")
        for imported in imports
        if imported == "stoker.platforms" or imported.startswith("stoker.platforms.")
    ]
    assert bad == []


def test_the_platforms_use_only_the_gateways_public_names() -> None:
    """The platforms' room depends on what the gateway offers, never on its privates."""
    bad = []
    for path in (ROOT / "platforms").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "stoker.gateway"
            ):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private or any(p.startswith("_") for p in (node.module or "").split(".")):
                    bad.append(f"{path.name}: from {node.module} import {private}")
    assert bad == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle a depth-first walk of `graph` meets, as the path that closes it."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def dfs(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                dfs(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node, [node])
    return cycles


def test_no_import_cycles() -> None:
    """Not even through an import inside a function: hiding an edge from the interpreter
    until the call does not hide it from a reader."""
    assert _cycles(_graph(inner=True)) == []


def test_a_cycle_through_a_type_only_import_is_found() -> None:
    """Two modules, one importing the other at run time and the other importing it back
    only for type checking: the walk sees both edges, and the cycle is reported."""
    sources = {
        "stoker.agent.otel": "from stoker.agent.telemetry import Telemetry\n",
        "stoker.agent.telemetry": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from stoker.agent.otel import OtelTelemetry\n"
        ),
    }
    graph = {
        name: {i for i in _imports(ast.parse(code), name, False) if i in sources}
        for name, code in sources.items()
    }
    assert _cycles(graph) == [["stoker.agent.otel", "stoker.agent.telemetry", "stoker.agent.otel"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def _documented_layers() -> dict[str, int]:
    """The rows `| N | `package` | what it owns |` of the architecture page's table."""
    row = re.compile(r"^\|\s*(\d+)\s*\|\s*`([\w.]+)`\s*\|", re.M)
    return {name: int(rank) for rank, name in row.findall(ARCHITECTURE.read_text("utf-8"))}


def test_the_architecture_page_draws_these_layers() -> None:
    assert _documented_layers() == LAYERS


def test_the_architecture_page_names_only_modules_that_exist() -> None:
    named = set(re.findall(r"`(stoker/[\w/]+(?:\.py|/))`", ARCHITECTURE.read_text("utf-8")))
    assert named, "the page names no module"
    assert sorted(n for n in named if not (ROOT.parent / n).exists()) == []


def test_the_walker_sees_an_upward_edge() -> None:
    tree = ast.parse("from stoker.agent.agent import Agent\nimport stoker.cli")
    assert _imports(tree, "stoker.wire.prefix", False) >= {
        "stoker.agent.agent",
        "stoker.cli",
    }


def test_the_walker_counts_imports_inside_functions_for_cycles() -> None:
    tree = ast.parse("def f():\n    from stoker.agent.otel import exporting\n")
    assert "stoker.agent.otel" not in _imports(tree, "stoker.agent.telemetry", False)
    assert "stoker.agent.otel" in _imports(tree, "stoker.agent.telemetry", False, inner=True)


def test_the_walker_counts_type_only_imports() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from stoker.agent.session import Session\n"
    )
    assert "stoker.agent.session" in _imports(tree, "stoker.agent.loop", False)
