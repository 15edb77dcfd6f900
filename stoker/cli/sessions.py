"""`stoker sessions ...`: stored sessions from the terminal."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.table import Table

from stoker.cache.pricing import total_cost
from stoker.cli.errors import fail
from stoker.cli.options import Db
from stoker.cli.render import console, cost_text
from stoker.cli.settings import settings
from stoker.config import Config
from stoker.session_views import export_session, show_session
from stoker.store import open_store
from stoker.store.base import SqlEventStore

T = TypeVar("T")

sessions_app = typer.Typer(
    help="Stored sessions: list, show, export, remove.", no_args_is_help=True
)


def with_store(config: Config, job: Callable[[SqlEventStore], Awaitable[T]]) -> T:
    """Run `job` on the configured store, closed afterwards whatever happens."""

    async def run() -> T:
        store = open_store(config.database)
        try:
            return await job(store)
        finally:
            await store.close()

    return asyncio.run(run())


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@sessions_app.command("list")
def list_(db: Db = None, limit: int = typer.Option(50)) -> None:
    """The most recently updated sessions."""
    rows = with_store(settings(db=db), lambda s: s.list_sessions(limit=limit))
    table = Table(title="sessions", title_justify="left")
    for col in ("id", "role", "model", "messages", "updated", "title"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.id, r.role, r.model, str(r.message_count), _when(r.updated_at), r.title)
    console.print(table)


@sessions_app.command()
def show(session_id: str, db: Db = None) -> None:
    """History, tokens and cost per turn."""
    view = with_store(settings(db=db), lambda s: show_session(s, session_id))
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
def export(session_id: str, db: Db = None) -> None:
    """Every event of a session as JSON lines on standard output."""
    for line in with_store(settings(db=db), lambda s: export_session(s, session_id)):
        typer.echo(line)


@sessions_app.command("rm")
def remove(session_id: str, db: Db = None) -> None:
    """Delete a session and its forks."""
    if not with_store(settings(db=db), lambda s: s.delete(session_id)):
        fail(f"no session {session_id!r}")
    console.print(f"removed {session_id}")
