"""Shared builders for the agent tests: a registry with several toolsets, sim agents."""

from __future__ import annotations

from typing import Any

from stoker.agent.agent import Agent
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import RuleModel, SimModel
from stoker.providers.sim.provider import SimProvider
from stoker.tools import Tool, ToolRegistry, Toolset, tool

# Long enough that the prefix passes Sonnet 4.6's 1,024-token cache minimum.
SYSTEM = "You are a test agent. " + "Follow the rules of the house carefully. " * 160


@tool(risky=True)
def wipe(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return "wiped"  # where it is used, it must be refused or stopped before it runs


def make_registry(calls: list[str] | None = None) -> ToolRegistry:
    """Toolsets 'files', 'memory', 'shell'; every tool body logs its name into `calls`."""
    log = calls if calls is not None else []

    def logged(name: str, description: str) -> Tool:
        def body(text: str) -> str:
            log.append(name)
            return f"{name} ok: {text}"

        body.__name__ = name
        body.__doc__ = f"{description}\n\nArgs:\n    text: What to act on."
        return tool(body)

    return ToolRegistry(
        [
            Toolset(
                name="files",
                tools=[logged("read_file", "Read a file."), logged("list_files", "List files.")],
            ),
            Toolset(name="memory", tools=[logged("memory_add", "Remember a fact.")]),
            Toolset(name="shell", tools=[logged("run_shell", "Run a shell command.")]),
        ]
    )


def sim_agent(
    *,
    model: SimModel | None = None,
    clock: FrozenClock | None = None,
    llm: str = "claude-sonnet-4-6",
    **kwargs: Any,
) -> tuple[Agent, SimProvider]:
    clock = clock or FrozenClock()
    provider = SimProvider(engine=SimEngine(model=model or RuleModel()), clock=clock)
    kwargs.setdefault("system", SYSTEM)
    return Agent(provider=provider, model=llm, clock=clock, **kwargs), provider


def without_markers(value: Any) -> Any:
    """A payload (or a part of one) without its cache_control markers: markers are not
    part of the cached content, so requests that differ only in them share the cache."""
    if isinstance(value, dict):
        return {k: without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_markers(v) for v in value]
    return value
