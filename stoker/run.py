"""One turn from the command line: the library function behind `stoker run`."""

from __future__ import annotations

from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.loop import TurnResult
from stoker.providers.sim.provider import SimProvider
from stoker.toolkits.workspace import workspace_toolset
from stoker.tools import ToolRegistry


async def run_once(prompt: str, *, model: str, workdir: Path) -> TurnResult:
    registry = ToolRegistry()
    registry.register(workspace_toolset(workdir, writable=False))
    agent = Agent(provider=SimProvider(), model=model, registry=registry)
    return await agent.session().send(prompt)
