"""`stoker sessions ...` and `stoker chat`: stored sessions from the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.table import Table

from stoker.agent.keepwarm import KeepWarm
from stoker.agent.session import Session
from stoker.cache.pricing import total_cost
from stoker.cli.render import cost_text, records_table
from stoker.cli.settings import settings
from stoker.config import DEFAULT_MODEL, DEFAULT_PROVIDER, Config
from stoker.errors import StokerError
from stoker.run import default_agent
from stoker.session_views import export_session, show_session
from stoker.store import open_store
from stoker.store.base import SqlEventStore

T = TypeVar("T")

sessions_app = typer.Typer(
    help="Stored sessions: list, show, export, remove.", no_args_is_help=True
)
console = Console()

DB_HELP = (
    "Session database: a path or postgresql:// URL "
    "(default: STOKER_DATABASE_URL, else STOKER_DB, else stoker.db in STOKER_HOME, "
    "else in the user data dir)."
)
PROVIDER_HELP = (
    "sim:, anthropic:MODEL, openai:MODEL, openai-chat:MODEL or openai-compatible:URL#MODEL "
    "(a model named here wins over --model)."
)


def _with_store(config: Config, job: Callable[[SqlEventStore], Awaitable[T]]) -> T:
    async def run() -> T:
        store = open_store(config.database)
        try:
            return await job(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StokerError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from exc


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@sessions_app.command("list")
def list_(db: str = typer.Option(None, help=DB_HELP), limit: int = typer.Option(50)) -> None:
    """The most recently updated sessions."""
    rows = _with_store(settings(db=db), lambda s: s.list_sessions(limit=limit))
    table = Table(title="sessions", title_justify="left")
    for col in ("id", "role", "model", "messages", "updated", "title"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.id, r.role, r.model, str(r.message_count), _when(r.updated_at), r.title)
    console.print(table)


@sessions_app.command()
def show(session_id: str, db: str = typer.Option(None, help=DB_HELP)) -> None:
    """History, tokens and cost per turn."""
    view = _with_store(settings(db=db), lambda s: show_session(s, session_id))
    console.print(f"[bold]{view.id}[/] ({view.role}, {view.model})")
    for t in view.turns:
        tools = f" [dim]tools: {', '.join(t.tools)}[/]" if t.tools else ""
        u = t.usage
        why = ", ".join(r.explanation.verdict for r in t.records)
        console.print(
            f"[bold]{t.number}.[/] {t.user}\n   → {t.answer.strip()}{tools}\n"
            f"   [dim]read {u.read} · written {u.written} · uncached {u.uncached} · "
            f"output {u.output} · {cost_text(t.cost_usd)} · why: {why}[/]"
        )
        for r in t.keep_warm:
            k = r.usage
            console.print(
                f"   [cyan]keep-warm {r.purpose}[/] [dim]read {k.read} · written {k.written} · "
                f"{cost_text(r.cost_usd)} · {r.explanation.detail}[/]"
            )
    for reason in view.rebases:
        console.print(f"[yellow]declared cache break:[/] {reason}")
    if view.keep_warm:
        spent = total_cost(r.cost_usd for r in view.keep_warm)
        console.print(f"keep-warm: {len(view.keep_warm)} requests, {cost_text(spent)}")
    u = view.usage
    console.print(
        f"total: {len(view.turns)} turns, read {u.read}, written {u.written}, "
        f"uncached {u.uncached}, hit ratio {u.hit_ratio:.1%}, {cost_text(view.cost_usd)}"
    )


@sessions_app.command()
def export(session_id: str, db: str = typer.Option(None, help=DB_HELP)) -> None:
    """Every event of a session as JSON lines on standard output."""
    for line in _with_store(settings(db=db), lambda s: export_session(s, session_id)):
        typer.echo(line)


@sessions_app.command("rm")
def remove(session_id: str, db: str = typer.Option(None, help=DB_HELP)) -> None:
    """Delete a session and its forks."""
    if not _with_store(settings(db=db), lambda s: s.delete(session_id)):
        console.print(f"[red]error:[/] no session {session_id!r}")
        raise typer.Exit(1)
    console.print(f"removed {session_id}")


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
    db: str = typer.Option(None, help=DB_HELP),
    model: str = typer.Option(DEFAULT_MODEL, help="Model, when --provider names none."),
    workdir: str = typer.Option(".", help="Folder the workspace tools may read."),
    provider: str = typer.Option(DEFAULT_PROVIDER, help=PROVIDER_HELP),
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

    _with_store(config, run)
