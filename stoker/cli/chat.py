"""`stoker chat`: a stored conversation in the terminal."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import typer

from stoker.agent.keepwarm import KeepWarm
from stoker.agent.session import Session
from stoker.cli.options import Db, Model, Provider, Workdir
from stoker.cli.render import console, records_table
from stoker.cli.sessions import with_store
from stoker.cli.settings import settings
from stoker.config import DEFAULT_MODEL, DEFAULT_PROVIDER
from stoker.run import default_agent
from stoker.store.base import SqlEventStore


async def _converse(session: Session) -> None:
    while True:
        try:
            text = await asyncio.to_thread(console.input, "[bold]you> [/]")
        except EOFError:
            return
        if text.strip() in ("/exit", "/quit"):
            return
        if not text.strip():
            continue
        result = await session.send(text)
        console.print(result.text or f"[yellow]({result.exit})[/]")
        console.print(records_table([("chat", "-", r) for r in result.records], title=""))


def chat(
    resume: str = typer.Option(None, "--resume", help="Continue a stored session by id."),
    db: Db = None,
    model: Model = DEFAULT_MODEL,
    workdir: Workdir = ".",
    provider: Provider = DEFAULT_PROVIDER,
) -> None:
    """A conversation in the terminal, stored as it goes. /exit or Ctrl-D ends it."""
    config = settings(db=db, provider=provider, model=model)

    async def run(store: SqlEventStore) -> None:
        async with default_agent(config=config, workdir=Path(workdir)) as agent:
            session = await agent.open(store, resume, create=resume is None)
            console.print(f"[dim]session {session.id} — /exit to leave[/]")
            # While you read or think, the time policy keeps the cache warm if it pays.
            keep_warm = KeepWarm(agent.clock)
            keep_warm.watch(session)
            timers = asyncio.create_task(keep_warm.run())
            try:
                await _converse(session)
            finally:
                timers.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await timers
        console.print(f"[dim]resume with: stoker chat --resume {session.id}[/]")

    with_store(config, run)
