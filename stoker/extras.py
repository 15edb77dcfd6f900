"""Which extra brings each optional part, and the one error a missing part gives.

`pip install stoker` is the library, the CLI's local commands, the embedded simulator and
SQLite. Everything else is an extra (pyproject.toml), imported only where it is used, so a
core install never pays for it and a command that needs one names it. This module is the
table both the checks and the docs read; it imports nothing heavier than `importlib`.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

from stoker.errors import MissingExtra

# extra -> the top-level modules it must bring (the first one missing is named)
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("starlette", "uvicorn", "httptools", "aiohttp"),
    "anthropic": ("anthropic",),
    "openai": ("openai", "bpe_openai"),
    "google": ("google.genai",),
    "bedrock": ("aiobotocore",),
    "postgres": ("psycopg", "psycopg_pool"),
    "mcp": ("mcp",),
    "report": ("plotly", "matplotlib"),
    "otel": ("opentelemetry.sdk",),
    "bench": ("hypothesis",),
    "frameworks": (  # `stoker bench frameworks`: the frameworks it drives
        "pydantic_ai",
        "langgraph",
        "langchain_openai",
        "langchain_anthropic",
        "agents",
        "smolagents",
    ),
    "telegram": ("telegram",),
    "slack": ("slack_sdk",),
    "discord": ("discord",),
}


def _present(module: str) -> bool:
    if module in sys.modules:  # imported already, or blocked (None) as a test does
        return sys.modules[module] is not None
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def missing(extra: str, modules: tuple[str, ...] | None = None) -> str | None:
    """The first module of `extra` (or of `modules`, a part of it) not installed, or None."""
    return next((m for m in modules or EXTRAS[extra] if not _present(m)), None)


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise `MissingExtra` naming `extra` when `what` cannot run: one of `extra`'s modules
    (or of `modules`, the part of it `what` uses) is not installed."""
    absent = missing(extra, modules)
    if absent is not None:
        raise MissingExtra(extra, what, absent)
