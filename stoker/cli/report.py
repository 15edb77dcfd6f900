"""`stoker report`: what the cache did for a session tree, or for every one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from stoker.cli.errors import fail
from stoker.cli.options import AsJson, Db
from stoker.cli.render import console, cost_text
from stoker.cli.settings import settings
from stoker.config import Config
from stoker.report.build import LineageReport
from stoker.report.output import Written, report_json, write_report
from stoker.session_ids import resolve
from stoker.store import open_store


def _summary(lineage: LineageReport) -> str:
    u = lineage.usage
    return (
        f"[bold]{escape(lineage.title or lineage.root_id)}[/] · session {lineage.root_id} · "
        f"{len(lineage.sessions)} sessions · {len(lineage.calls)} calls · "
        f"hit ratio {u.hit_ratio:.1%} · cost {lineage.cost} · "
        f"no cache {lineage.no_cache_cost} · saved ${lineage.savings_usd:.5f}"
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


def _show(written: Written) -> None:
    report = written.report
    for lineage in report.lineages:
        console.print(_summary(lineage))
        for r in lineage.by_session():
            console.print(
                f"  {r.session.role} {r.session.id}: {len(r.calls)} calls · "
                f"hit ratio {r.usage.hit_ratio:.1%} · cost {r.cost} · "
                f"saved ${r.savings_usd:.5f}",
                highlight=False,
            )
        console.print(_misses_table(lineage) if lineage.misses else "  no misses")
    for unknown in report.unpriced:
        console.print(f"[yellow]warning:[/] {unknown}", markup=False, highlight=False)
    console.print(
        f"{len(report.calls)} calls · hit ratio {report.usage.hit_ratio:.1%} · "
        f"cost {report.cost} · with no cache {report.no_cache_cost} · "
        f"saved ${report.savings_usd:.5f}"
    )
    for path in (written.html, written.png):
        if path is not None:
            console.print(f"wrote {path}")


async def _full_id(config: Config, given: str) -> str:
    async with open_store(config.database) as store:
        return await resolve(store, given)


def report(
    session_id: str = typer.Argument(
        None, help="A session (or a unique start of its id); its whole tree is reported."
    ),
    all_: bool = typer.Option(False, "--all", help="Every session tree in the database."),
    html: str = typer.Option(None, "--html", help="Write a self-contained HTML report here."),
    png: str = typer.Option(None, "--png", help="Write a PNG chart here."),
    as_json: AsJson = False,
    db: Db = None,
) -> None:
    """Cache reads and writes, cost against no cache, savings and every miss's cost."""
    if (session_id is None) == (not all_):
        fail("name one SESSION, or --all", code=2)
    config = settings(db=db)
    written = asyncio.run(
        write_report(
            config,
            None if all_ else asyncio.run(_full_id(config, session_id)),
            html=Path(html) if html else None,
            png=Path(png) if png else None,
        )
    )
    if as_json:
        typer.echo(report_json(written.report))
    else:
        _show(written)
