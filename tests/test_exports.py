"""The public names are exact: sorted, importable, and complete for the public modules."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import stoker

# Modules whose every public class and function is part of the top-level API.
PUBLIC_MODULES = [
    "stoker.errors",
    "stoker.clock",
    "stoker.agent.agent",
    "stoker.wire.blocks",
    "stoker.wire.usage",
    "stoker.wire.prefix",
    "stoker.wire.record",
]


def _ruff_order(name: str) -> tuple[int, str]:
    # ruff's RUF022: CONSTANTS, then Classes, then functions
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return group, name


def test_all_is_sorted_and_unique() -> None:
    assert stoker.__all__ == sorted(set(stoker.__all__), key=_ruff_order)


def test_every_exported_name_resolves() -> None:
    assert [n for n in stoker.__all__ if not hasattr(stoker, n)] == []


def test_public_modules_are_fully_exported() -> None:
    missing = []
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if attr.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if obj.__module__ == name and attr not in stoker.__all__:
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_every_exception_class_is_importable_from_stoker() -> None:
    missing = []
    for info in pkgutil.walk_packages(stoker.__path__, "stoker."):
        if info.name == "stoker.__main__":
            continue
        module = importlib.import_module(info.name)
        for attr, obj in vars(module).items():
            is_error = inspect.isclass(obj) and issubclass(obj, BaseException)
            ours = is_error and obj.__module__ == info.name and not attr.startswith("_")
            if ours and (attr not in stoker.__all__ or getattr(stoker, attr) is not obj):
                missing.append(f"{info.name}.{attr}")
    assert missing == []


def test_type_checkers_see_every_lazily_loaded_name_where_it_loads_from() -> None:
    """`stoker/__init__.py` loads its optional parts on first use (`_LAZY`, read by
    `__getattr__`); its `if TYPE_CHECKING:` imports must name the same modules, or a user's
    type checker sees `from stoker import AnthropicProvider` as an `object`."""
    tree = ast.parse(Path(stoker.__file__).read_text(encoding="utf-8"))
    lazy: dict[str, str] = {}
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_LAZY":
            lazy = ast.literal_eval(node.value)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom)
                typed |= {alias.name: str(imported.module) for alias in imported.names}
    assert lazy, "no _LAZY in stoker/__init__.py"
    assert typed == lazy
