"""`stoker serve` and `stoker bench gateway`: parse options, call the gateway, render."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import typer
from rich.console import Console

from stoker.config import DEFAULT_LIMITS
from stoker.errors import ConfigError

console = Console()


def serve(
    config: str = typer.Option(None, "--config", "-c", help="Gateway TOML file."),
    host: str = typer.Option(None, help="Address to listen on (default from the config)."),
    port: int = typer.Option(None, help="Port to listen on (default from the config)."),
    db: str = typer.Option(None, help="Session database: a path or postgresql:// URL."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
) -> None:
    """Run the multi-user gateway: HTTP API, OpenAI-compatible chat, dashboard at /ui."""
    from stoker import gateway

    try:
        settings = gateway.load_config(config, env=os.environ)
    except ConfigError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from exc
    if host:
        settings = dataclasses.replace(settings, host=host)
    if port:
        settings = dataclasses.replace(settings, port=port)
    if db:
        settings = dataclasses.replace(settings, database=db)
    if not len(settings.tokens):
        console.print(
            "[yellow]no users configured: every request will get 401. Add [[users]] with "
            "token_sha256 to the config, or set STOKER_GATEWAY_TOKENS.[/]"
        )
    console.print(f"gateway on http://{settings.host}:{settings.port} (dashboard at /ui)")
    gateway.serve(settings, log_level=log_level)


def bench_gateway(
    sessions: int = typer.Option(200, min=1, max=2000, help="Concurrent sessions."),
    messages: int = typer.Option(5, min=1, max=50, help="Messages per session, in order."),
    postgres: str = typer.Option(
        None,
        envvar="STOKER_BENCH_DATABASE_URL",
        help="PostgreSQL DSN instead of SQLite (a throwaway schema is created and dropped).",
    ),
    replicas: str = typer.Option(
        None,
        help="Replica counts, e.g. 1,2,4: N `stoker serve` processes on a PostgreSQL server "
        "of the benchmark's own, a random replica per message, a replica SIGKILLed and the "
        "database restarted mid-run (needs PostgreSQL binaries and a checkout).",
    ),
    faults: bool = typer.Option(True, help="With --replicas: also run with the faults."),
) -> None:
    """Concurrent sessions against a local gateway on loopback (sim at 0 ms): lost
    messages, per-session order, throughput, and the gateway's added latency."""
    from stoker.bench.gateway import gateway_table, run_gateway_bench
    from stoker.gateway.local import local_gateway

    if replicas:
        _bench_replicas(replicas, sessions=sessions, messages=messages, faults=faults)
        return

    with local_gateway(
        cache_size=max(DEFAULT_LIMITS.cache_size, sessions),
        postgres=postgres,
        process=True,
        env=os.environ,
    ) as (url, token):
        result = asyncio.run(run_gateway_bench(url, token, sessions=sessions, messages=messages))
    console.print(gateway_table(result))
    if result.lost or result.failed or result.out_of_order:
        raise typer.Exit(1)


def _bench_replicas(counts: str, *, sessions: int, messages: int, faults: bool) -> None:
    from stoker.bench.replicas import replica_table, run_replica_bench
    from stoker.gateway.replicas import launcher

    try:
        parsed = tuple(int(c) for c in counts.split(","))
    except ValueError:
        parsed = ()
    if not parsed or not all(1 <= c <= 16 for c in parsed):
        console.print(
            f"[red]error:[/] --replicas takes counts from 1 to 16, e.g. 1,2,4; not {counts!r}"
        )
        raise typer.Exit(2)
    launch = launcher(os.environ, wait_seconds=1, pool_size=8)
    runs = run_replica_bench(
        launch, parsed, env=os.environ, sessions=sessions, messages=messages, faults=faults
    )
    console.print(replica_table(runs))
    if any(r.lost or r.duplicated or r.reordered or r.failed for r in runs) or any(
        r.switches_full_read != r.switches for r in runs
    ):
        raise typer.Exit(1)
