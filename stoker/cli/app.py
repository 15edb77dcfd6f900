"""Command definitions."""

from __future__ import annotations

import asyncio
import json
import textwrap
from importlib.metadata import version
from pathlib import Path

import click

from stoker.cli.chat import chat
from stoker.cli.errors import Commands, fail
from stoker.cli.models import models
from stoker.cli.options import (
    cache_option,
    command_group,
    db_option,
    json_option,
    model_option,
    provider_option,
    workdir_option,
)
from stoker.cli.proxy import proxy, report_proxy
from stoker.cli.render import console, cost_text, counted, print_simulator_note, records_table
from stoker.cli.report import audit, report
from stoker.cli.serve import bench_gateway, serve
from stoker.cli.sessions import sessions_app
from stoker.cli.settings import settings
from stoker.cli.sim import sim_app


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        console.print(f"stoker {version('stoker')}", highlight=False)
        ctx.exit()


app = command_group(
    "stoker",
    "Stoker: an agent runtime that keeps the provider's prompt cache warm.",
    cls=Commands,
    params=[
        click.Option(
            ["--version", "-V"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_print_version,
            help="Print the installed version and exit.",
        )
    ],
    commands=[chat, report, audit, serve, proxy, report_proxy, models],
)
bench_app = command_group(
    "bench", "Benchmarks; each prints a table of figures.", commands=[bench_gateway]
)


@app.command()
@click.option("--save", is_flag=True, help="Keep the session in the database, for `stoker report`.")
@db_option
def demo(save: bool, db: str | None) -> None:
    """Run a demo session on the simulator.

    Six tool-using turns with background reviews, each call shown with its cache effect."""
    from stoker.demo import run_demo

    report = asyncio.run(run_demo(database=settings(db=db).database if save else None))
    rows = [(r.label, str(r.turn) if r.turn else "-", r.record) for r in report.rows]
    console.print(
        records_table(rows, title="Stoker demo: every provider call and its cache effect")
    )
    for r in report.reviews:
        mark = "[green]✓[/]" if r.read_whole_prefix else "[red]✗[/]"
        changed = f": [bold]{r.summary}[/]" if r.summary else ": nothing new to save"
        console.print(
            f"{mark} {r.label} after turn {r.after_turn}{changed} · first call read "
            f"{r.read_tokens} of the parent's {r.parent_prefix_tokens} prefix tokens"
        )
    console.print(
        f"total cost {cost_text(report.cost_usd)} for {counted(len(report.rows), 'call')}; "
        f"the same tokens without a cache: {cost_text(report.uncached_cost_usd)}"
    )
    if save:
        # the command on a line of its own and never wrapped, so it copies whole
        console.print(f"stored as session {report.session_id}; chart it with:", highlight=False)
        console.print(
            f"  stoker report {report.session_id} --html report.html --png report.png",
            soft_wrap=True,
            highlight=False,
        )


@app.command()
@click.argument("prompt", help="What to ask.")
@model_option
@workdir_option
@provider_option
@click.option("--session", help="Run the turn in this stored session (created if new).")
@db_option
@cache_option
def run(
    prompt: str,
    model: str,
    workdir: str,
    provider: str,
    session: str | None,
    db: str | None,
    cache: str | None,
) -> None:
    """Run one turn with the workspace tools.

    Prints the answer, the tools that ran, and each provider call's cache effect."""
    from stoker.run import run_once

    config = settings(db=db, provider=provider, model=model, cache=cache)
    turn = asyncio.run(run_once(prompt, config=config, workdir=Path(workdir), session_id=session))
    print_simulator_note(config)
    console.print(turn.result.text, markup=False, highlight=False)
    ran = ", ".join(turn.tools) if turn.tools else "none"
    console.print(f"tools: {ran}", style="dim", markup=False, highlight=False)
    rows = [("main", str(turn.number), r) for r in turn.result.records]
    console.print(records_table(rows, title="calls"))


# the groups after the commands, as `stoker -h` lists them
app.add_command(bench_app)
app.add_command(sessions_app)
app.add_command(sim_app)


@bench_app.command("overhead")
@click.option("--turns", default=200, help="Measured turns per history size.")
def bench_overhead(turns: int) -> None:
    """Framework CPU time per turn.

    The sim model at 0 ms, at 10, 100 and 1,000 messages of history."""
    from stoker.bench.overhead import overhead_table, run_overhead

    console.print(overhead_table(run_overhead(turns=turns)))


@bench_app.command("sim")
@click.option(
    "--calls",
    default=200,
    type=click.IntRange(min=1),
    help="Measured calls per API, transport and size.",
)
def bench_sim(calls: int) -> None:
    """The simulator's time per call.

    At 10, 100 and 1,000 messages, in process and over HTTP."""
    from stoker.bench.sim import run_sim_bench, sim_table

    console.print(sim_table(run_sim_bench(calls=calls)))


@bench_app.command("resume")
@click.option("--runs", default=5, help="Resumes measured per size.")
@click.option(
    "--postgres",
    envvar="STOKER_BENCH_DATABASE_URL",
    show_envvar=True,
    help="PostgreSQL DSN to measure too (a throwaway schema is created and dropped).",
)
def bench_resume(runs: int, postgres: str | None) -> None:
    """Time to resume a stored session.

    Sessions of 100, 1,000 and 10,000 events, on SQLite and PostgreSQL."""
    from stoker.bench import resume as resume_bench

    console.print(resume_bench.resume_table(resume_bench.run(runs=runs, postgres=postgres)))
    if not postgres:
        console.print("[dim]PostgreSQL not measured: pass --postgres DSN[/]")


# What each workload of `stoker bench cache` runs: its help and the names it accepts.
CACHE_WORKLOADS = {
    "hard": "8 tools, a 24-call tool loop, a 6-minute idle gap, a fork, and a resume in a "
    "new process",
    "library-defaults": "the hard workload with every agent at its defaults: what a library "
    "user who configures no keep-warm gets",
    "typed": "one session asking for three different output types",
    "extended": "background memory and skill reviews, 3 parallel sub-agents, a 40-minute "
    "gap, a rebuild from the store, /model there and back, a toolkit connecting "
    "mid-session, and a 3-hour gap",
    "fleet": "--sessions fresh sessions of one agent arriving at 1, 10 and 60 a minute, "
    "keyed three ways on OpenAI; then Anthropic sessions every 2, 8 and 20 minutes, "
    "keep-warm weighing each session or the fleet; then Gemini sessions every 2, 10 and 30 "
    "minutes with explicit caches, one per session or one per agent (storage token-hours)",
    "providers": "the hard workload on each provider's simulated API (Anthropic, OpenAI, "
    "Bedrock, OpenRouter, DeepSeek, vLLM, llama.cpp, Gemini implicit and explicit), one "
    "row each",
    "foresight": "the time policy against perfect foresight: the hard and extended "
    "workloads, users whose returns follow four mixtures (chat, office, overnight, "
    "breaks), and --fuzz random gap sequences (the worst printed)",
}


def _workloads_help() -> str:
    """One entry a workload, its name then what it runs, laid out by hand: click rewraps
    every paragraph but one that starts with a backspace character (`\\b`)."""
    width = max(map(len, CACHE_WORKLOADS)) + 2
    lines = [
        textwrap.fill(
            f"{name:<{width}}{what}.", 78, subsequent_indent=" " * width, break_on_hyphens=False
        )
        for name, what in CACHE_WORKLOADS.items()
    ]
    return "\b\n" + "\n".join(lines)


@bench_app.command(
    "cache",
    help="Whole simulated sessions held to the ideal cache use.\n\n"
    "Sessions on the simulator with a frozen clock, held to the ideal (every distinct "
    "prefix token written once): per phase and in total. --workload runs one of these "
    "(all: every one):\n\n" + _workloads_help(),
)
@click.option(
    "--workload",
    default="all",
    help=f"{', '.join(CACHE_WORKLOADS)}, or all (each is described above).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--sessions", default=200, type=click.IntRange(min=2), help="Fresh sessions per fleet run."
)
@click.option(
    "--fuzz",
    default=300,
    type=click.IntRange(min=1),
    help="Random gap sequences the foresight run tries.",
)
@click.option(
    "--seed",
    default=4040,  # `stoker.bench.returns.FUZZ_SEED`, not imported until a bench runs
    type=int,
    help="Seed of the foresight run's random gap sequences.",
)
def bench_cache(workload: str, as_json: bool, sessions: int, fuzz: int, seed: int) -> None:
    """Whole simulated sessions held to the ideal cache use (the help is `CACHE_WORKLOADS`)."""
    from stoker.bench import providers as by_provider
    from stoker.bench import returns
    from stoker.bench.cache import cache_table, run_cache_bench
    from stoker.bench.fleet import (
        arrivals_table,
        fleet_table,
        run_arrivals_bench,
        run_fleet_bench,
    )
    from stoker.bench.fleet_storage import SESSIONS, run_storage_bench, storage_table

    known = tuple(CACHE_WORKLOADS)
    names = known if workload == "all" else (workload,)
    if any(n not in known for n in names):
        fail(f"unknown workload {workload!r}: {', '.join(known)} or all", code=2)
    alone = ("fleet", "providers", "foresight")
    wanted = tuple(n for n in names if n not in alone)
    if "foresight" in names:  # held to foresight: the hard and extended runs' records
        wanted = (*wanted, *(n for n in ("hard", "extended") if n not in wanted))
    results = asyncio.run(run_cache_bench(wanted))
    foresight = (
        returns.run_foresight(results, fuzz=fuzz, seed=seed) if "foresight" in names else None
    )
    results = [r for r in results if r.name in names]
    rows = asyncio.run(by_provider.run_providers_bench()) if "providers" in names else []
    fleet = asyncio.run(run_fleet_bench(sessions=sessions)) if "fleet" in names else []
    arrivals = asyncio.run(run_arrivals_bench()) if "fleet" in names else []
    at_most = min(sessions, SESSIONS)  # Gemini's storage: 24 sessions a run tell it
    storage = asyncio.run(run_storage_bench(sessions=at_most)) if "fleet" in names else []
    if as_json:
        data: dict[str, object] = {}
        if results:
            data["workloads"] = [r.to_dict() for r in results]
        if fleet:
            data["fleet"] = [f.to_dict() for f in fleet]
            data["fleet_arrivals"] = [a.to_dict() for a in arrivals]
            data["fleet_storage"] = [f.to_dict() for f in storage]
        if rows:
            data["providers"] = [by_provider.to_dict(r) for r in rows]
        if foresight is not None:
            data["foresight"] = returns.foresight_dict(*foresight)
        click.echo(json.dumps(data, indent=2))
        return
    for figures in results:
        console.print(cache_table(figures))
        for phase in figures.phases:
            if phase.keep_warm_calls:
                share = phase.keep_warm_units / phase.rewrite_units if phase.rewrite_units else 0
                console.print(
                    f"  {phase.name}: keep-warm spent {phase.keep_warm_units:,.0f} base-input "
                    f"tokens, {share:.0%} of one rewrite ({phase.rewrite_units:,.0f})"
                )
        for miss in figures.total.misses:
            console.print(f"  miss {miss}")
        console.print(f"  undeclared misses: {figures.total.undeclared}")
    if fleet:
        console.print(fleet_table(fleet))
        console.print(arrivals_table(arrivals))
        console.print(storage_table(storage))
    if rows:
        console.print(by_provider.providers_table(rows))
    if foresight is not None:
        console.print(returns.foresight_table(*foresight))


@bench_app.command("fuzz")
@click.option("--examples", default=200, type=click.IntRange(min=1), help="Random sessions to run.")
@click.option(
    "--steps", default=40, type=click.IntRange(min=1), help="Operations per session at most."
)
def bench_fuzz(examples: int, steps: int) -> None:
    """Random sessions where every call must read its best.

    Loops, forks, reviews, sub-agents, resumes, rebuilds and reconciles, rebases a fork
    must run, model and thinking switches (one model drops earlier thinking), toolkits,
    idle gaps with and without keep-warm, in random order. Every call must read the best
    the simulator's entries allowed, and every record's verdict must agree with a second
    accountant that sees only the requests and the usage the provider reported."""
    try:
        from hypothesis.stateful import run_state_machine_as_test

        from stoker.bench.fuzz import CacheMachine, fuzz_settings
    except ImportError as exc:
        fail(f"{exc}; install the fuzzer with pip install 'stoker[bench]'")
    run_state_machine_as_test(CacheMachine, settings=fuzz_settings(examples, steps))
    console.print(
        f"{counted(examples, 'random session')} of up to {counted(steps, 'operation')}: "
        "every invariant held"
    )


@bench_app.command("firstturn")
@click.option("--runs", default=10, help="Sessions measured per case.")
def bench_firstturn(runs: int) -> None:
    """First-turn latency with a warm and a cold toolkit cache.

    The toolkit fetch takes 200 ms."""
    from stoker.bench.firstturn import firstturn_table, run_firstturn

    console.print(firstturn_table(asyncio.run(run_firstturn(runs=runs))))


@bench_app.command("compaction")
@click.option("--turns", default=300, type=click.IntRange(min=1), help="Turns of the session.")
@click.option(
    "--window",
    default=24_000,
    type=click.IntRange(min=10_000),
    help="Context window, in tokens.",
)
@json_option
def bench_compaction(turns: int, window: int, as_json: bool) -> None:
    """A long session past a small context window.

    A tool-using session: compactions and cost, idle-aware against a fixed threshold
    and against no cache."""
    from stoker.bench.compaction import compaction_table, run_compaction_bench

    figures = asyncio.run(run_compaction_bench(turns=turns, window=window))
    if as_json:
        click.echo(json.dumps(figures.to_dict(), indent=2))
        return
    console.print(compaction_table(figures))


@bench_app.command("frameworks")
@click.option(
    "--only", multiple=True, help="A framework's name as the table prints it (repeatable)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_frameworks(only: tuple[str, ...], as_json: bool) -> None:
    """Other frameworks' agents, in process and through the proxy.

    pydantic-ai, LangGraph (ChatOpenAI, ChatAnthropic), openai-agents and smolagents run
    one conversation with a tool and an idle gap on the simulator: cost against no cache
    and writes against the ideal, through `stoker proxy --optimize` and in process with
    `stoker.http_client(optimize=True)`. Needs the `frameworks` extra."""
    from stoker.bench.frameworks import FRAMEWORKS, frameworks_table, run_frameworks_bench

    unknown = [name for name in only if name not in FRAMEWORKS]
    if unknown:
        fail(f"--only {unknown[0]!r}: expected one of {', '.join(map(repr, FRAMEWORKS))}", code=2)
    figures = run_frameworks_bench(list(only) or None)
    if as_json:
        click.echo(json.dumps([f.to_dict() for f in figures], indent=2))
        return
    console.print(frameworks_table(figures))


@bench_app.command("proxy")
@click.option(
    "--rounds", default=5, type=click.IntRange(min=1), help="Runs of the workload each way."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_proxy(rounds: int, as_json: bool) -> None:
    """A caching-off framework's traffic, direct and proxied.

    A tool loop, a 6-minute gap, a fork and a resume, sent directly and through `stoker
    proxy --optimize`: cost against no cache; and the latency `stoker proxy` processes
    add in audit and optimize mode."""
    from stoker.bench.proxy import proxy_table, run_proxy_bench

    figures = asyncio.run(run_proxy_bench(rounds=rounds))
    if as_json:
        click.echo(json.dumps(figures.to_dict(), indent=2))
        return
    console.print(proxy_table(figures))
