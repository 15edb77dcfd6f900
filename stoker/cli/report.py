"""`stoker report`: what the cache did for a session tree, or for every one; and `stoker
audit`: the same report of the calls in a trace file an agent exported."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from stoker.cache.prices import PriceBook
from stoker.cli.errors import fail
from stoker.cli.options import db_option, html_option, json_option, png_option
from stoker.cli.render import console, cost_text, counted, no_sessions_yet, saving_text
from stoker.cli.settings import reading, settings
from stoker.config import Config
from stoker.errors import StokerError
from stoker.report.build import LineageReport, Report
from stoker.report.output import Written, report_json, write_files, write_report
from stoker.session_ids import resolve
from stoker.store import open_store


def _summary(lineage: LineageReport) -> str:
    u = lineage.usage
    storage = f" · of it storage {cost_text(lineage.storage_usd)}" if lineage.storage_usd else ""
    heading = lineage.title or lineage.root_id
    # an audited conversation's title is its id: said once
    session = "" if heading == lineage.root_id else f" · session {escape(lineage.root_id)}"
    return (
        f"[bold]{escape(heading)}[/]{session} · "
        f"{counted(len(lineage.sessions), 'session')} · {counted(len(lineage.calls), 'call')} · "
        f"hit ratio {u.hit_ratio:.1%} · cost {lineage.cost}{storage} · "
        f"no cache {lineage.no_cache_cost} · {saving_text(lineage.savings_usd)}"
    )


def _misses_table(lineage: LineageReport) -> Table:
    table = Table(title="misses", title_justify="left")
    for name in ("call", "why", "it cost", "the fix saves", "read with the fix", "fix"):
        table.add_column(name)
    for m in lineage.misses:
        table.add_row(
            str(m.call),
            escape(m.explanation),
            cost_text(m.cost_usd),
            cost_text(m.saving_usd),
            f"{m.read_with_fix:,}",
            m.fix if m.replayed else f"{m.fix} (estimated from this call)",
        )
    return table


def show(written: Written) -> None:
    """A report on the terminal: each tree's totals, sessions, notes and misses, then the
    totals, what other choices would have saved, and the files written. `stoker report`,
    `stoker report-proxy` and `stoker audit` all print this."""
    report = written.report
    if report.source:
        console.print(f"[bold]{report.title}[/] · {escape(report.source)}", soft_wrap=True)
    for lineage in report.lineages:
        console.print(_summary(lineage), soft_wrap=True)
        for r in lineage.by_session():
            console.print(
                f"  {r.session.role} {r.session.id}: {counted(len(r.calls), 'call')} · "
                f"hit ratio {r.usage.hit_ratio:.1%} · cost {r.cost} · "
                f"{saving_text(r.savings_usd)}",
                highlight=False,
                soft_wrap=True,
            )
        for note in lineage.notes:
            console.print(f"  {note}", markup=False, highlight=False, soft_wrap=True)
        console.print(_misses_table(lineage) if lineage.misses else "  no misses")
    for unknown in report.unpriced:
        console.print(f"[yellow]warning:[/] {unknown}", markup=False, highlight=False)
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"{counted(len(report.calls), 'call')} · hit ratio {report.usage.hit_ratio:.1%} · "
        f"cost {report.cost} · with no cache {report.no_cache_cost} · "
        f"{saving_text(report.savings_usd)}",
        soft_wrap=True,
    )
    for what in report.what_if:
        console.print(str(what), markup=False, highlight=False, soft_wrap=True)
    for path in (written.html, written.png):
        if path is not None:
            console.print(f"wrote {path}")


def report_files(make: Callable[[], Report], html: str | None, png: str | None) -> Written:
    """`make`'s report, its HTML page and PNG chart written where asked; a refusal on the
    way (a bad trace, a missing extra, a path it cannot write) ends the command."""
    try:
        return write_files(
            make(), html=Path(html) if html else None, png=Path(png) if png else None
        )
    except StokerError as exc:
        fail(str(exc))


async def _full_id(config: Config, given: str) -> str:
    async with open_store(config.database) as store:
        return await resolve(store, given)


@click.command()
@click.argument(
    "session_id",
    required=False,
    help="A session: its id, its short id or a unique start of its id; its whole tree is reported.",
)
@click.option("--all", "all_", is_flag=True, help="Every session tree in the database.")
@html_option
@png_option
@json_option
@db_option
def report(
    session_id: str | None,
    all_: bool,
    html: str | None,
    png: str | None,
    as_json: bool,
    db: str | None,
) -> None:
    """What the cache did for a session tree, and what it saved.

    Cache reads and writes, cost against no cache, savings and every miss's cost."""
    if (session_id is None) == (not all_):
        fail("name one SESSION, or --all", code=2)
    config = reading(db)
    written = asyncio.run(
        write_report(
            config,
            None if session_id is None else asyncio.run(_full_id(config, session_id)),
            html=Path(html) if html else None,
            png=Path(png) if png else None,
        )
    )
    if as_json:
        click.echo(report_json(written.report))
    elif not written.report.lineages:
        console.print(no_sessions_yet(settings(db=db).database), soft_wrap=True)
    else:
        show(written)


@click.command()
@click.argument(
    "trace", help="A trace file: OTLP JSON, one export a line (a collector's file exporter)."
)
@html_option
@png_option
@json_option
@db_option
def audit(trace: str, html: str | None, png: str | None, as_json: bool, db: str | None) -> None:
    """What the cache did in traces an agent exported.

    Traces in the OpenTelemetry GenAI conventions: every miss with its cause, expiries,
    and what Stoker's planner and time policy would have saved. Prices: the catalogue
    and your prices.toml."""
    from stoker.audit import audit_file

    config = settings(db=db)
    written = report_files(
        lambda: audit_file(Path(trace), prices=PriceBook.load(config.prices_file)), html, png
    )
    if as_json:
        click.echo(report_json(written.report))
    else:
        show(written)
