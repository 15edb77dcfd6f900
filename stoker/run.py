"""One turn from the command line: the library function behind `stoker run`."""

from __future__ import annotations

from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.loop import TurnResult
from stoker.agent.session import Session
from stoker.providers.select import DEFAULT as DEFAULT_PROVIDER
from stoker.providers.select import select_provider
from stoker.store import SessionNotFound, open_store
from stoker.store.base import SqlEventStore
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
    model: str,
    workdir: Path,
    provider: str = DEFAULT_PROVIDER,
    session_id: str | None = None,
    db: str | None = None,
) -> TurnResult:
    """One turn; with `session_id`, in that stored session (created if it is new)."""
    agent = default_agent(model=model, workdir=workdir, provider=provider)
    store = open_store(db) if session_id else None
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
