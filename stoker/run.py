"""One turn from the command line: the library function behind `stoker run`."""

from __future__ import annotations

from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.loop import TurnResult
from stoker.providers.sim.provider import SimProvider
from stoker.toolkits.workspace import WORKSPACE_SYSTEM, workspace_toolset
from stoker.tools import ToolRegistry


def default_agent(*, model: str, workdir: Path) -> Agent:
    """The agent of `stoker run` and `stoker chat`: read-only workspace tools on the sim."""
    registry = ToolRegistry()
    registry.register(workspace_toolset(workdir, writable=False))
    return Agent(
        provider=SimProvider(),
        model=model,
        registry=registry,
        system=WORKSPACE_SYSTEM,
        kind="stoker-cli",
    )


async def run_once(prompt: str, *, model: str, workdir: Path) -> TurnResult:
    return await default_agent(model=model, workdir=workdir).session().send(prompt)
