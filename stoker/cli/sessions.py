"""`stoker sessions ...`: stored sessions from the terminal."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import click
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stoker.cache.pricing import total_cost
from stoker.cli.options import command_group, db_option, json_option, session_id_argument
from stoker.cli.render import console, cost_text, counted, no_sessions_yet
from stoker.cli.settings import reading, settings
from stoker.config import Config
from stoker.errors import SessionNotFound
from stoker.session_ids import resolve, short_ids
from stoker.session_views import (
    SessionView,
    export_session,
    show_session,
    summary_dict,
    view_dict,
)
from stoker.store import open_store
from stoker.store.base import SqlEventStore
from stoker.wire.stored import SessionSummary

T = TypeVar("T")

sessions_app = command_group("sessions", "Stored sessions: list, show, export, rm.")


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


# Columns after the id, most wanted first; a narrow terminal drops them from the end
# rather than squeezing every column into unreadable slivers. Title takes what is left.
_EXTRA = ("updated", "messages", "model", "role")
_TITLE_MIN = 12
_EDGE = 3  # a column's padding and border


def sessions_table(
    rows: Sequence[SessionSummary], short: Mapping[str, str], width: int
) -> RenderableType:
    """The session list for a terminal `width` columns wide. Every column gets an exact
    width, so rich never squeezes one to nothing: the id column shows each session's
    short id whole (never wrapped or cut), and the title gets what the others leave."""
    cells = {
        r.id: {
            "id": short[r.id],
            "updated": _when(r.updated_at),
            "messages": str(r.message_count),
            "model": r.model,
            "role": r.role,
        }
        for r in rows
    }

    def need(col: str) -> int:
        return max([len(col), *(len(c[col]) for c in cells.values())])

    used = 1 + need("id") + _EDGE
    if used + 4 + _EDGE > width:  # not even a sliver of title fits: ids alone, one a line
        return Text("\n".join(short[r.id] for r in rows), no_wrap=False)
    columns = ["id"]
    for col in _EXTRA:
        if used + need(col) + _EDGE + _TITLE_MIN + _EDGE <= width:
            columns.append(col)
            used += need(col) + _EDGE
    table = Table(title="sessions", title_justify="left")
    for col in columns:
        table.add_column(col, no_wrap=True, width=need(col))
    table.add_column("title", no_wrap=True, overflow="ellipsis", width=width - used - _EDGE)
    for r in rows:
        table.add_row(*(cells[r.id][c] for c in columns), r.title)
    return table


@sessions_app.command("list")
@db_option
@click.option(
    "--limit", default=50, type=click.IntRange(min=1), help="How many sessions, newest first."
)
@json_option
def list_(db: str | None, limit: int, as_json: bool) -> None:
    """The most recently updated sessions.

    Each with a short id that `show`, `export`, `rm`, `report` and `chat --resume`
    accept: the shortest start of its id no other has, or for a fork, review or
    sub-agent its parent's short id and the start of its own part
    (68a132a6.review-1a2b)."""

    async def listed(store: SqlEventStore) -> tuple[list[SessionSummary], dict[str, str]]:
        rows = await store.list_sessions(limit=limit)
        return rows, short_ids([r.id for r in rows], await store.session_ids())

    rows, short = with_store(reading(db), listed)
    if as_json:
        click.echo(json.dumps([summary_dict(r, short_id=short[r.id]) for r in rows], indent=2))
        return
    if not rows:
        console.print(no_sessions_yet(settings(db=db).database), soft_wrap=True)
        return
    console.print(sessions_table(rows, short, console.width))


def turns_view(view: SessionView) -> RenderableType:
    """The turns with a hanging indent: the number and the message, then under the message
    the answer, the tools the turn ran, its tokens and cost, its approvals and keep-warm
    requests, each on a line of its own, so a label never runs on after a multi-line
    answer and a wrapped line stays under its own text."""
    margin = len(f"{len(view.turns)}.")
    lines: list[RenderableType] = []

    def line(mark: str, body: str | Text) -> None:
        grid = Table.grid(padding=(0, 1))  # one row each: no padding out to the widest
        grid.add_column(justify="right", no_wrap=True, width=margin)
        grid.add_column(overflow="fold")
        grid.add_row(mark, body)
        lines.append(grid)

    for t in view.turns:
        u = t.usage
        why = ", ".join(r.explanation.verdict for r in t.records)
        line(f"[bold]{t.number}.[/]", Text(t.user))
        line("→", Text(t.answer.strip()))
        if t.tools:
            line("", Text(f"tools: {', '.join(t.tools)}", style="dim"))
        line(
            "",
            f"[dim]read {u.read} · written {u.written} · uncached {u.uncached} · "
            f"output {u.output} · {cost_text(t.cost_usd)} · why: {why}[/]",
        )
        for approval in t.approvals:
            line("", f"[magenta]approval:[/] {escape(approval)}")
        for r in t.keep_warm:
            k = r.usage
            line(
                "",
                f"[cyan]keep-warm {r.purpose}[/] [dim]read {k.read} · written {k.written} · "
                f"{cost_text(r.cost_usd)} · {escape(r.explanation.detail)}[/]",
            )
    return Group(*lines)


@sessions_app.command()
@session_id_argument
@db_option
@json_option
def show(session_id: str, db: str | None, as_json: bool) -> None:
    """History, tokens and cost per turn."""

    async def view_of(store: SqlEventStore) -> SessionView:
        return await show_session(store, await resolve(store, session_id))

    view = with_store(reading(db), view_of)
    if as_json:
        click.echo(json.dumps(view_dict(view), indent=2, ensure_ascii=False))
        return
    console.print(f"[bold]{view.id}[/] ({view.role}, {view.model})")
    console.print(turns_view(view))
    for reason in view.rebases:
        console.print(f"[yellow]declared cache break:[/] {escape(reason)}")
    if view.keep_warm:
        spent = total_cost(r.cost_usd for r in view.keep_warm)
        requests = counted(len(view.keep_warm), "request")
        console.print(f"keep-warm: {requests}, {cost_text(spent)}")
    u = view.usage
    console.print(
        f"total: {counted(len(view.turns), 'turn')}, read {u.read}, written {u.written}, "
        f"uncached {u.uncached}, hit ratio {u.hit_ratio:.1%}, {cost_text(view.cost_usd)}"
    )


@sessions_app.command()
@session_id_argument
@db_option
def export(session_id: str, db: str | None) -> None:
    """Every event of a session as JSON lines on standard output."""

    async def lines(store: SqlEventStore) -> list[str]:
        return await export_session(store, await resolve(store, session_id))

    for line in with_store(reading(db), lines):
        click.echo(line)


@sessions_app.command("rm")
@session_id_argument
@db_option
def remove(session_id: str, db: str | None) -> None:
    """Delete a session and its forks."""

    async def delete(store: SqlEventStore) -> str:
        sid = await resolve(store, session_id)
        if not await store.delete(sid):  # removed by someone else meanwhile
            raise SessionNotFound(sid)
        return sid

    console.print(f"removed {with_store(reading(db), delete)}")
