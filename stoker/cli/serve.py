"""`stoker serve` and `stoker bench gateway`: parse options, call the gateway, render.

`stoker serve` composes the process: the gateway, and the chat platforms' bridges beside
it (`stoker.platforms`), both configured from the one file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from functools import partial

import click
from click.exceptions import Exit

from stoker.cli.errors import fail
from stoker.cli.options import db_option, json_option
from stoker.cli.render import console
from stoker.config import DEFAULT_LIMITS
from stoker.extras import require

# Printed as plain text (rich would read `[[users]]` as markup and swallow it), on
# standard output, so `stoker serve > gateway.toml` starts a config file. Its agent is the
# gateway's starter agent (`starter_agent_toml`), the one a config without an [agent] table
# also serves: a real small agent, so what a new operator first runs caches (the system
# prompt `stoker chat` uses, past the default model's 1,024-token minimum, with the
# read-only workspace tools, is the prefix a session's first message writes and the next
# ones read; keep-warm holds it between messages).
_EXAMPLE_HEAD = """\
host = "127.0.0.1"
port = 8765

[[users]]
id = "alice"
# the sha256 of alice's bearer token (the token itself is never stored):
#   python -c "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())" TOKEN
token_sha256 = "REPLACE-WITH-THE-SHA256-OF-A-TOKEN"

[keep_warm]                   # refresh an idle session's cache before it expires, when that
enabled = true                # costs less than writing it again with the next message
hourly_usd = 1.0              # the most all sessions' keep-warm may spend in an hour

# Each user's own memory, saved by background reviews and read by their next session:
# [memory]
# directory = "memory"
# review_every = 5

# A chat platform (pip install 'stoker[telegram]'; the docs' Chat platforms > Telegram):
# [platforms.telegram]
# token_env = "TELEGRAM_BOT_TOKEN"   # the token from @BotFather, in the environment
# allowed_users = [123456789]        # nobody is answered until listed
# Or Slack (pip install 'stoker[slack]'; the docs' Chat platforms > Slack):
# [platforms.slack]
# token_env = "SLACK_BOT_TOKEN"                # xoxb-...
# signing_secret_env = "SLACK_SIGNING_SECRET"  # Basic Information > Signing Secret
# allowed_users = ["U0123ABCD"]
# Or Discord (pip install 'stoker[discord]'; the docs' Chat platforms > Discord):
# [platforms.discord]
# token_env = "DISCORD_BOT_TOKEN"              # Developer Portal > your app > Bot > Token
# allowed_users = ["80351110224678912"]        # user ids; allowed_servers for whole servers

"""


def example_config() -> str:
    """The example config; the gateway (and so the `server` extra) loads only here."""
    from stoker.gateway.config import starter_agent_toml

    return _EXAMPLE_HEAD + starter_agent_toml()


@click.command()
@click.option("--config", "-c", help="Gateway TOML file.")
@click.option("--host", help="Address to listen on (default from the config).")
@click.option("--port", type=int, help="Port to listen on (default from the config).")
@db_option
@click.option("--log-level", default="info", help="uvicorn log level.")
def serve(
    config: str | None, host: str | None, port: int | None, db: str | None, log_level: str
) -> None:
    """Run the multi-user gateway, its dashboard and chat bots.

    It serves an HTTP API, OpenAI-compatible chat, a dashboard at /ui and the chat
    platforms. With no users and no platform configured it prints an example config
    instead.

    Chat platforms are sections of the config file (the documentation's "Chat
    platforms" pages say more).

    [platforms.telegram] starts a Telegram bot; pip install 'stoker[telegram]'.

    mode = "polling" (the default) or "webhook", with webhook_url and webhook_secret_env.

    [platforms.slack] starts a Slack app; pip install 'stoker[slack]'.

    mode = "events" (the default; Slack posts to /platforms/slack/events) or "socket".

    signing_secret_env or signing_secret_file: the app's signing secret (events mode).

    app_token_env or app_token_file: the app-level xapp- token (socket mode).

    [platforms.discord] starts a Discord bot; pip install 'stoker[discord]'.

    It answers direct messages, and mentions in server channels and threads.

    allowed_servers (Discord): server ids whose members may all talk to the bot.

    token_env or token_file: where the bot token is; never in the config file itself.

    allowed_users, allowed_chats: who is answered (default: nobody); "*" for everyone.

    rate_per_minute, burst: how many messages each chat may send.

    [memory] directory = "memory" gives each user their own memory, saved by a
    background review every review_every turns and read by their next session.
    """
    require("server", "stoker serve")
    from stoker import gateway
    from stoker.platforms.config import load_platforms
    from stoker.platforms.registry import build_bridges

    settings = gateway.load_config(config, env=os.environ)
    platforms = load_platforms(config, env=os.environ)
    if host:
        settings = dataclasses.replace(settings, host=host)
    if port is not None:  # 0 too: a free port, which the banner then names
        settings = dataclasses.replace(settings, port=port)
    if db:
        settings = dataclasses.replace(settings, database=db)
    if not len(settings.tokens) and not platforms.names:
        # Every request would get 401: show how to add a user instead of serving nobody.
        click.echo(example_config(), nl=False)
        fail(
            "no users configured, so every request would get 401. Add [[users]] to the "
            "config as in the example above (`stoker serve --config FILE`), or set "
            "STOKER_GATEWAY_TOKENS=alice=TOKEN."
        )

    def up(url: str) -> None:  # only once the port is ours and the app started
        console.print(f"gateway on {url} (dashboard at /ui)")
        for name in platforms.names:
            console.print(f"platform: {name}")

    # the platforms' bridges run beside the gateway, started and stopped with its app
    gateway.serve(
        settings,
        log_level=log_level,
        companions=partial(build_bridges, platforms),
        started=up,
    )


@click.command("gateway")
@click.option(
    "--sessions",
    type=click.IntRange(1, 2000),
    help="Concurrent sessions (default 200; 100 with --http).",
)
@click.option(
    "--messages",
    type=click.IntRange(1, 50),
    help="Messages per session, in order (default 5; 10 with --http).",
)
@click.option(
    "--http",
    is_flag=True,
    help="A `stoker serve` process driven over loopback HTTP by --clients connections, on "
    "the native and the OpenAI-compatible endpoints: the server's CPU ms per message, "
    "messages/s, latency, and lost / duplicated / reordered.",
)
@click.option(
    "--clients",
    default=100,
    type=click.IntRange(1, 1000),
    help="With --http: concurrent clients.",
)
@click.option(
    "--rounds", default=3, type=click.IntRange(1, 20), help="With --http: runs of each checkout."
)
@click.option(
    "--against",
    help="With --http: a commit of this repository, run the same way (exported to a "
    "temporary folder, on this interpreter) alternately with this checkout.",
)
@click.option(
    "--postgres",
    envvar="STOKER_BENCH_DATABASE_URL",
    show_envvar=True,
    help="PostgreSQL DSN instead of SQLite (a throwaway schema is created and dropped).",
)
@click.option(
    "--replicas",
    help="Replica counts, e.g. 1,2,4: N `stoker serve` processes on a PostgreSQL server "
    "of the benchmark's own, a random replica per message, a replica SIGKILLed and the "
    "database restarted mid-run (needs PostgreSQL binaries and a checkout).",
)
@click.option(
    "--faults/--no-faults", default=True, help="With --replicas: also run with the faults."
)
@click.option(
    "--workload",
    default="messages",
    help="messages: sessions sending messages in order. fleet: one agent's fresh sessions "
    "at 10 and 60 a minute spread over --replicas gateways on one database (simulated "
    "time; SQLite, or the --postgres server).",
)
@json_option
def bench_gateway(
    sessions: int | None,
    messages: int | None,
    http: bool,
    clients: int,
    rounds: int,
    against: str | None,
    postgres: str | None,
    replicas: str | None,
    faults: bool,
    workload: str,
    as_json: bool,
) -> None:
    """Concurrent sessions against a local gateway.

    On loopback with the simulator at 0 ms: lost messages, per-session order, throughput
    and the gateway's added latency; or, with --workload fleet, one agent's fresh sessions
    over replicas."""
    require("server", "stoker bench gateway")
    from stoker.bench.gateway import gateway_table, run_gateway_bench
    from stoker.gateway.local import local_gateway

    if http:
        _bench_http(
            clients=clients,
            sessions=sessions or 100,
            messages=messages or 10,
            rounds=rounds,
            against=against,
            postgres=postgres,
        )
        return
    sessions, messages = sessions or 200, messages or 5
    if workload == "fleet":
        _bench_fleet(replicas or "4", postgres=postgres, as_json=as_json)
        return
    if workload != "messages":
        fail(f"--workload is messages or fleet, not {workload!r}")
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
        raise Exit(1)


def _bench_http(
    *,
    clients: int,
    sessions: int,
    messages: int,
    rounds: int,
    against: str | None,
    postgres: str | None,
) -> None:
    from stoker.bench.gateway_http import paired_table, run_paired

    database = "PostgreSQL" if postgres else "SQLite"
    runs = run_paired(
        clients=clients,
        sessions=sessions,
        messages=sessions * messages,
        rounds=rounds,
        against=against,
        postgres=postgres,
        env=os.environ,
    )
    title = (
        f"stoker serve over loopback HTTP: {clients} clients, {sessions * messages:,} messages "
        f"over {sessions} sessions, {database}, sim at 0 ms, median of {rounds} run(s)"
    )
    console.print(paired_table(runs, title=title))
    if not runs.clean:
        raise Exit(1)


def _bench_fleet(count: str, *, postgres: str | None, as_json: bool) -> None:
    import tempfile
    from pathlib import Path

    from stoker.bench.fleet_replicas import (
        fleet_replica_table,
        postgres_databases,
        run_fleet_replica_bench,
        sqlite_databases,
    )

    if not count.isdigit() or not 2 <= int(count) <= 16:
        fail(f"--replicas with --workload fleet takes one count from 2 to 16, not {count!r}")
    with tempfile.TemporaryDirectory(prefix="stoker-fleet-") as folder:
        databases = postgres_databases(postgres) if postgres else sqlite_databases(Path(folder))
        results = asyncio.run(run_fleet_replica_bench(databases, replicas=int(count)))
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        console.print(fleet_replica_table(results))


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
        raise Exit(2)
    launch = launcher(os.environ, wait_seconds=1, pool_size=8)
    runs = run_replica_bench(
        launch, parsed, env=os.environ, sessions=sessions, messages=messages, faults=faults
    )
    console.print(replica_table(runs))
    if any(r.lost or r.duplicated or r.reordered or r.failed for r in runs) or any(
        r.switches_full_read != r.switches for r in runs
    ):
        raise Exit(1)
