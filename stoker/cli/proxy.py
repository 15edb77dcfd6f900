"""`stoker proxy` (record, and with --optimize fix, any framework's provider traffic) and
`stoker report-proxy` (what that traffic did with the cache, per lineage)."""

from __future__ import annotations

import asyncio
import json

import typer
from rich.table import Table

from stoker.cli.errors import fail
from stoker.cli.options import AsJson, Db
from stoker.cli.render import console
from stoker.cli.settings import settings
from stoker.errors import StokerError
from stoker.proxy.report import LineageReport, proxy_report
from stoker.store.open import open_store


def proxy(
    listen: str = typer.Option("127.0.0.1:8789", help="HOST:PORT to listen on."),
    upstream: str = typer.Option(
        "anthropic", help="anthropic, openai, or the base URL of any compatible server."
    ),
    optimize: bool = typer.Option(
        False, "--optimize", help="Rewrite requests for the cache (else: audit only)."
    ),
    db: Db = None,
) -> None:
    """Forward a client's calls to its provider and record each with its cache effect."""
    from stoker.http_server import run
    from stoker.proxy import ProxyConfig, create_app
    from stoker.proxy.recorder_process import RecorderProcess
    from stoker.proxy.routes import upstream_url

    host, _, port = listen.rpartition(":")
    try:
        target = upstream_url(upstream)
        if not host or not port.isdigit():
            raise StokerError(f"--listen {listen!r}: expected HOST:PORT")
    except StokerError as exc:
        fail(str(exc), code=2)
    database = str(settings(db=db).database)

    async def migrate() -> None:  # here, once, before the recorder process opens it
        async with open_store(database) as store:
            await store.schema_version()

    try:
        asyncio.run(migrate())
    except StokerError as exc:
        fail(str(exc))
    config = ProxyConfig(upstream=target, optimize=optimize)
    app = create_app(config, sink=None, process=RecorderProcess(database))
    url = f"http://{host}:{port}"
    mode = "optimize" if optimize else "audit"
    console.print(
        f"Stoker proxy ({mode}) on {url} -> {target}\n"
        f"  ANTHROPIC_BASE_URL={url}\n  OPENAI_BASE_URL={url}/v1\n"
        "  keys pass through to the upstream and are never stored; `stoker report-proxy` "
        "shows what was recorded",
        soft_wrap=True,
    )
    run(app, host=host, port=int(port), ws="none", lifespan="on", log_level="warning")


def report_proxy(
    db: Db = None,
    limit: int = typer.Option(20, min=1, help="Most recently used lineages to show."),
    as_json: AsJson = False,
) -> None:
    """Per lineage of proxied calls: read share, writes vs the ideal, cost vs no cache,
    the breakpoints optimize mode added, and each miss with its cause and cost."""

    async def read() -> list[LineageReport]:
        async with open_store(settings(db=db).database) as store:
            return list(await proxy_report(store, limit=limit))

    reports = asyncio.run(read())
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in reports], indent=2))
        return
    if not reports:
        console.print("no proxied calls recorded yet: run `stoker proxy` and point a client at it")
        return
    table = Table(title="proxied lineages", title_justify="left")
    for col in ("lineage", "title", "calls", "pings", "read share", "written/ideal", "vs no cache"):
        table.add_column(col, justify="left" if col in ("lineage", "title") else "right")
    for r in reports:
        ratio = r.writes_vs_ideal
        fork = f"\n fork of {r.lineage.parent_id}" if r.lineage.parent_id else ""
        table.add_row(
            r.lineage.id + fork,
            r.lineage.title[:40],
            str(r.calls),
            str(r.pings),
            f"{r.read_share:.1%}",
            f"{ratio:.2f}x" if ratio is not None else "-",
            f"{r.cost_vs_no_cache:.3f}",
        )
    console.print(table)
    for r in reports:
        _details(r)


def _details(report: LineageReport) -> None:
    lines = [f"  added breakpoint {b}" for b in report.added_breakpoints]
    lines += [f"  rewrote {w}" for w in report.rewrites]
    lines += [f"  cannot fix {c}" for c in report.cannot_fix]
    for miss in report.misses:
        cost = f"${miss.cost_usd:.6f}" if miss.cost_usd is not None else "?"
        lines.append(
            f"  miss #{miss.seq}: {miss.explanation} — {miss.lost_tokens:,} tokens not read, "
            f"{cost} ({miss.cost_units:,.0f} base-input tokens)"
        )
    if lines:
        console.print(f"[bold]{report.lineage.id}[/]", soft_wrap=True)
        for line in lines:
            console.print(line, soft_wrap=True, markup=False)
