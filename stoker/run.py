"""One turn from the command line: the library function behind `stoker run`."""

from __future__ import annotations

from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.loop import TurnResult
from stoker.providers.select import DEFAULT as DEFAULT_PROVIDER
from stoker.providers.select import select_provider
from stoker.store import open_store
from stoker.toolkits.workspace import WORKSPACE_SYSTEM, workspace_toolset
from stoker.tools import ToolRegistry


def default_agent(*, model: str, workdir: Path, provider: str = DEFAULT_PROVIDER) -> Agent:
    """The agent of `stoker run` and `stoker chat`: read-only workspace tools, on the sim
    unless `provider` names another (a model named there wins over `model`)."""
    choice = select_provider(provider)
    registry = ToolRegistry()
    registry.register(workspace_toolset(workdir, writable=False))
    return Agent(
        provider=choice.provider,
        model=choice.model or model,
        registry=registry,
        system=WORKSPACE_SYSTEM,
        name="stoker-cli",
    )


async def run_once(
    prompt: str,
    *,
    model: str,
    workdir: Path,
    provider: str = DEFAULT_PROVIDER,
    session_id: str | None = None,
    db: str | None = None,
) -> TurnResult:
    """One turn; with `session_id`, in that stored session (created if it is new)."""
    async with default_agent(model=model, workdir=workdir, provider=provider) as agent:
        if session_id is None:
            return await agent.session().send(prompt)
        async with open_store(db) as store:
            session = await agent.open(store, session_id)
            return await session.send(prompt)
