"""`stoker proxy` (record, and with --optimize fix, any framework's provider traffic) and
`stoker report-proxy` (what that traffic did with the cache, as `stoker report` tells it)."""

from __future__ import annotations

import asyncio

import click

from stoker.cache.prices import PriceBook
from stoker.cli.errors import fail
from stoker.cli.options import db_option, html_option, json_option, png_option
from stoker.cli.render import console
from stoker.cli.report import report_files, show
from stoker.cli.settings import reading, settings
from stoker.errors import StokerError
from stoker.extras import require
from stoker.proxy.report import proxy_report
from stoker.report.build import Report
from stoker.report.output import report_json
from stoker.store.open import open_store


@click.command()
@click.option("--listen", default="127.0.0.1:8789", help="HOST:PORT to listen on.")
@click.option(
    "--upstream",
    default="anthropic",
    help="anthropic, openai, openrouter, deepseek, or the base URL of any compatible "
    "server (Bedrock's URL too: its signed requests are forwarded, never rewritten).",
)
@click.option("--optimize", is_flag=True, help="Rewrite requests for the cache (else: audit only).")
@db_option
def proxy(listen: str, upstream: str, optimize: bool, db: str | None) -> None:
    """Forward a client's calls to its provider, recording each.

    Each call is stored with its cache effect; --optimize also rewrites requests for
    the cache."""
    require("server", "stoker proxy")
    from stoker import http_server
    from stoker.proxy import ProxyConfig, create_app
    from stoker.proxy.recorder_process import RecorderProcess
    from stoker.proxy.routes import upstream_url

    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:8789
    try:
        target = upstream_url(upstream)
        if not host or not port.isdigit():
            raise StokerError(f"--listen {listen!r}: expected HOST:PORT")
    except StokerError as exc:
        fail(str(exc), code=2)
    database = str(settings(db=db).database)
    # The port first: a port in use is said before anything is written.
    sockets = http_server.listen(
        host, int(port), owner="stoker proxy", port_flag="--listen", host_flag="--listen"
    )

    async def migrate() -> None:  # here, once, before the recorder process opens it
        async with open_store(database) as store:
            await store.schema_version()

    try:
        asyncio.run(migrate())
    except StokerError as exc:
        for sock in sockets:
            sock.close()
        fail(str(exc))
    config = ProxyConfig(upstream=target, optimize=optimize)
    app = create_app(config, sink=None, process=RecorderProcess(database))
    mode = "optimize" if optimize else "audit"

    def up() -> None:  # only once the port is ours and the proxy started
        url = http_server.base_url(host, sockets[0].getsockname()[1])
        console.print(
            f"Stoker proxy ({mode}) on {url} -> {target}\n"
            f"  ANTHROPIC_BASE_URL={url}\n  OPENAI_BASE_URL={url}/v1\n"
            "  keys pass through to the upstream and are never stored; `stoker report-proxy` "
            "shows what was recorded",
            soft_wrap=True,
        )

    http_server.serve(app, sockets, started=up, ws="none", lifespan="on", log_level="warning")


@click.command("report-proxy")
@db_option
@click.option(
    "--limit", default=20, type=click.IntRange(min=1), help="Most recently used lineages to show."
)
@html_option
@png_option
@json_option
def report_proxy(
    db: str | None, limit: int, html: str | None, png: str | None, as_json: bool
) -> None:
    """What proxied traffic did with the cache.

    As `stoker report` tells it: cost, savings, writes against the ideal per lineage,
    what --optimize changed, and each miss with its cause, its fix and what the fix
    saves."""
    config = reading(db)

    async def read() -> Report:
        async with open_store(config.database) as store:
            return await proxy_report(store, prices=PriceBook.load(config.prices_file), limit=limit)

    written = report_files(lambda: asyncio.run(read()), html, png)
    report = written.report
    if as_json:
        click.echo(report_json(report))
        return
    if not report.lineages:
        console.print("no proxied calls recorded yet: run `stoker proxy` and point a client at it")
        return
    show(written)
