"""One turn from the command line: the library function behind `stoker run`."""

from __future__ import annotations

from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.loop import TurnResult
from stoker.agent.session import Session
from stoker.config import Config
from stoker.providers.select import select_provider
from stoker.store import SessionNotFound, open_store
from stoker.store.base import SqlEventStore
from stoker.toolkits.workspace import WORKSPACE_SYSTEM, workspace_toolset
from stoker.tools import ToolRegistry


def default_agent(*, config: Config, workdir: Path) -> Agent:
    """The agent of `stoker run` and `stoker chat`: read-only workspace tools, on the
    provider `config` names (a model named in its spec wins over `config.model`)."""
    choice = select_provider(config.provider, config=config)
    registry = ToolRegistry()
    registry.register(workspace_toolset(workdir, writable=False))
    return Agent(
        provider=choice.provider,
        model=choice.model or config.model,
        registry=registry,
        system=WORKSPACE_SYSTEM,
        kind="stoker-cli",
    )


async def open_or_resume(agent: Agent, session_id: str, store: SqlEventStore) -> Session:
    """The stored session `session_id` resumed by `agent`, or a new one with that id."""
    try:
        return await Session.resume(session_id, agent, store=store)
    except SessionNotFound:
        return agent.session(session_id=session_id, sink=store)


async def run_once(
    prompt: str,
    *,
    config: Config,
    workdir: Path,
    session_id: str | None = None,
) -> TurnResult:
    """One turn; with `session_id`, in that stored session of `config.database` (created
    if it is new)."""
    agent = default_agent(config=config, workdir=workdir)
    store = open_store(config.database) if session_id else None
    try:
        if store is not None and session_id is not None:
            session = await open_or_resume(agent, session_id, store)
        else:
            session = agent.session()
        return await session.send(prompt)
    finally:
        close = getattr(agent.provider, "aclose", None)
        if close is not None:  # real providers hold HTTP connections
            await close()
        if store is not None:
            await store.close()
