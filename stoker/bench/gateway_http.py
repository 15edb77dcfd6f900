"""The gateway as it is deployed: a `stoker serve` process, driven over loopback HTTP.

N clients, each on its own keep-alive connection, send M messages over S sessions (a
session belongs to one client, which sends its messages in order), on the native
endpoint (`POST /v1/sessions/{id}/messages`) and then on the OpenAI-compatible one
(`POST /v1/chat/completions` with the `X-Stoker-Session` header, resending the whole
conversation as OpenAI clients do), each on sessions of its own created before the
load. The figure that matters is the server's CPU time per message: read from
/proc/PID/stat (user + system, all threads) just before and just after the load, so
start-up and session creation are not in it. The load generator shares the machine's
cores, so messages/s and latency swing from run to run; CPU time per message does not.

Afterwards every session's history is read back: a message sent but not stored is
*lost*, one stored twice is *duplicated*, and a session whose stored messages are not
in the order sent is *reordered*.

`--against COMMIT` runs another checkout of the project (exported with `git archive`
into a temporary folder) the same way, with this interpreter, alternating A/B/A/B,
so the ratio of the two is measured side by side on the same machine and load.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import secrets
import statistics
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from stoker.bench.gateway import Connection
from stoker.bench.tables import figures_table
from stoker.gateway.local import Served, dsn_in_schema, serve_process

ENDPOINTS = ("native", "openai")
MAX_CLIENTS = 1_000
MAX_SESSIONS = 2_000
MAX_MESSAGES = 100_000
MAX_ROUNDS = 20
SESSION_HEADER = "X-Stoker-Session"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads), from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICK


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    """One endpoint's load on one server process."""

    endpoint: str
    sent: int
    failed: int  # answers other than 200
    lost: int
    duplicated: int
    reordered: int  # sessions
    seconds: float
    cpu_seconds: float  # the server's, over the load
    latency_ms: tuple[float, ...]  # sorted, the client's view

    @property
    def cpu_ms_per_message(self) -> float:
        return self.cpu_seconds * 1000 / self.sent if self.sent else 0.0

    @property
    def throughput(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        v = self.latency_ms
        return v[min(len(v) - 1, int(len(v) * p))] if v else 0.0

    @property
    def clean(self) -> bool:
        return not (self.failed or self.lost or self.duplicated or self.reordered)


def _text(session: int, message: int) -> str:
    return f"session {session} message {message}"


def _plan(sessions: int, messages: int) -> list[int]:
    """How many messages each session gets: `messages` spread as evenly as it goes."""
    return [messages // sessions + (1 if s < messages % sessions else 0) for s in range(sessions)]


async def _send(
    conn: Connection, endpoint: str, sid: str, text: str, said: list[dict[str, str]]
) -> int:
    if endpoint == "native":
        status, _, _ = await conn.request("POST", f"/v1/sessions/{sid}/messages", {"text": text})
        return status
    asked = {"role": "user", "content": text}
    body = {"model": "stoker", "messages": [*said, asked]}
    status, _, answer = await conn.request(
        "POST", "/v1/chat/completions", body, {SESSION_HEADER: sid}
    )
    if status == 200:  # the conversation as the client now holds it
        said += [
            asked,
            {"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
        ]
    return status


async def _client(
    conn: Connection, endpoint: str, mine: list[tuple[int, str, int]], latency: list[float]
) -> int:
    """Sends the messages of this client's sessions, each session's in order."""
    failed = 0
    said: dict[str, list[dict[str, str]]] = {sid: [] for _, sid, _ in mine}
    for j in range(max((count for _, _, count in mine), default=0)):
        for index, sid, count in mine:
            if j >= count:
                continue
            start = time.perf_counter()
            try:
                status = await _send(conn, endpoint, sid, _text(index, j), said[sid])
            except (OSError, EOFError, IndexError, ValueError):  # a connection cut: failed
                conn.drop()
                status = 0
            latency.append((time.perf_counter() - start) * 1000)
            failed += status != 200
    return failed


async def _check(conn: Connection, index: int, sid: str, count: int) -> tuple[int, int, bool]:
    """(lost, duplicated, reordered) of one session, from its stored history."""
    _, _, view = await conn.request("GET", f"/v1/sessions/{sid}")
    sent = [_text(index, j) for j in range(count)]
    got = [t["user"] for t in view["turns"]]
    lost = len(set(sent) - set(got))
    duplicated = len(got) - len(set(got))
    kept = [t for t in dict.fromkeys(got) if t in set(sent)]
    return lost, duplicated, kept != [t for t in sent if t in set(kept)]


async def _checks(
    conn: Connection, mine: list[tuple[int, str, int]]
) -> list[tuple[int, int, bool]]:
    return [await _check(conn, index, sid, count) for index, sid, count in mine]


async def run_load(
    served: Served,
    endpoint: str,
    *,
    clients: int,
    sessions: int,
    messages: int,
    time_limit: float = 600.0,
) -> LoadResult:
    """`messages` over `sessions` from `clients` connections; bounded in count and time."""
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint is one of {', '.join(ENDPOINTS)}, not {endpoint!r}")
    if not (1 <= clients <= MAX_CLIENTS and 1 <= sessions <= MAX_SESSIONS):
        raise ValueError(f"clients must be 1-{MAX_CLIENTS} and sessions 1-{MAX_SESSIONS}")
    if not sessions <= messages <= MAX_MESSAGES:
        raise ValueError(f"messages must be from the session count to {MAX_MESSAGES}")
    clients = min(clients, sessions)  # a session's messages come from one client, in order
    conns = [Connection(served.url, served.token) for _ in range(clients)]
    latency: list[float] = []
    try:
        async with asyncio.timeout(time_limit):
            ids: list[str] = []
            for batch in range(0, sessions, clients):
                made = await asyncio.gather(
                    *(c.request("POST", "/v1/sessions", {}) for c in conns[: sessions - batch])
                )
                if any(status != 201 for status, _, _ in made):
                    raise RuntimeError(f"creating sessions failed: {made[0]}")
                ids += [body["id"] for _, _, body in made]
            plan = list(zip(range(sessions), ids, _plan(sessions, messages), strict=True))
            before, start = cpu_seconds(served.pid), time.perf_counter()
            failed = await asyncio.gather(
                *(_client(c, endpoint, plan[i::clients], latency) for i, c in enumerate(conns))
            )
            seconds, used = time.perf_counter() - start, cpu_seconds(served.pid) - before
            checked = await asyncio.gather(
                *(_checks(c, plan[i::clients]) for i, c in enumerate(conns))
            )
            checks = [c for mine in checked for c in mine]
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    return LoadResult(
        endpoint=endpoint,
        sent=messages,
        failed=sum(failed),
        lost=sum(c[0] for c in checks),
        duplicated=sum(c[1] for c in checks),
        reordered=sum(1 for c in checks if c[2]),
        seconds=seconds,
        cpu_seconds=used,
        latency_ms=tuple(sorted(latency)),
    )


@contextmanager
def checkout(commit: str, *, repo: Path) -> Iterator[Path]:
    """The tree of `commit` of the git repository `repo`, exported to a temporary folder."""
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", commit],
        capture_output=True,
        check=False,
        timeout=120,
    )
    if tar.returncode:
        raise RuntimeError(f"git archive {commit}: {tar.stderr.decode().strip()}")
    with tempfile.TemporaryDirectory(prefix="stoker-against-") as folder:
        with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
            archive.extractall(folder, filter="data")
        yield Path(folder)


def this_checkout() -> Path:
    """The folder holding this `stoker` package (a checkout, or site-packages)."""
    return Path(__file__).resolve().parents[2]


@contextmanager
def _database(folder: Path, postgres: str | None) -> Iterator[str]:
    """A SQLite file in `folder`, or a throwaway empty schema the server migrates itself."""
    if postgres is None:
        yield str(folder / "gw.db")
        return
    import psycopg  # the postgres extra

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield dsn_in_schema(postgres, schema)
    finally:
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_server(
    source: Path | None,
    *,
    clients: int,
    sessions: int,
    messages: int,
    postgres: str | None,
    env: Mapping[str, str],
    endpoints: tuple[str, ...] = ENDPOINTS,
) -> list[LoadResult]:
    """One `stoker serve` of `source` (None: this checkout) under each endpoint's load."""
    with tempfile.TemporaryDirectory(prefix="stoker-http-") as tmp:
        folder = Path(tmp)
        with (
            _database(folder, postgres) as database,
            serve_process(
                folder,
                database,
                token=secrets.token_urlsafe(32),
                cache_size=max(sessions * len(endpoints), 16),
                env=env,
                source=source or this_checkout(),
            ) as served,
        ):
            return [
                asyncio.run(
                    run_load(served, e, clients=clients, sessions=sessions, messages=messages)
                )
                for e in endpoints
            ]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedRuns:
    """Every run of each side, in the order run: this checkout, and `against` if any."""

    this: tuple[tuple[LoadResult, ...], ...]
    against: str | None = None
    other: tuple[tuple[LoadResult, ...], ...] = ()

    @property
    def clean(self) -> bool:
        return all(r.clean for run in (*self.this, *self.other) for r in run)


def run_paired(
    *,
    clients: int,
    sessions: int,
    messages: int,
    rounds: int,
    against: str | None,
    postgres: str | None,
    env: Mapping[str, str],
    endpoints: tuple[str, ...] = ENDPOINTS,
    repo: Path | None = None,
) -> PairedRuns:
    """`rounds` runs of this checkout, alternated with `against`'s when named."""
    if not 1 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds must be 1-{MAX_ROUNDS}")
    load: dict[str, Any] = {
        "clients": clients,
        "sessions": sessions,
        "messages": messages,
        "postgres": postgres,
        "env": env,
        "endpoints": endpoints,
    }
    this: list[tuple[LoadResult, ...]] = []
    other: list[tuple[LoadResult, ...]] = []
    with contextlib.ExitStack() as stack:
        tree = (
            stack.enter_context(checkout(against, repo=repo or this_checkout()))
            if against
            else None
        )
        for _ in range(rounds):
            if tree is not None:
                other.append(tuple(run_server(tree, **load)))
            this.append(tuple(run_server(None, **load)))
    return PairedRuns(this=tuple(this), against=against, other=tuple(other))


def _median(runs: tuple[tuple[LoadResult, ...], ...], endpoint: str, figure: str) -> float:
    values = [getattr(r, figure) for run in runs for r in run if r.endpoint == endpoint]
    return statistics.median(values) if values else 0.0


def _p(runs: tuple[tuple[LoadResult, ...], ...], endpoint: str, p: float) -> float:
    values = [r.percentile(p) for run in runs for r in run if r.endpoint == endpoint]
    return statistics.median(values) if values else 0.0


def _faults(runs: tuple[tuple[LoadResult, ...], ...], endpoint: str) -> str:
    mine = [r for run in runs for r in run if r.endpoint == endpoint]
    sums = (sum(getattr(r, f) for r in mine) for f in ("failed", "lost", "duplicated"))
    return " / ".join(str(s) for s in (*sums, sum(r.reordered for r in mine)))


def _round_ratios(p: PairedRuns, endpoint: str) -> list[float]:
    ratios = []
    for mine, theirs in zip(p.this, p.other, strict=False):
        a = [r.cpu_ms_per_message for r in mine if r.endpoint == endpoint]
        b = [r.cpu_ms_per_message for r in theirs if r.endpoint == endpoint]
        if a and b and b[0]:
            ratios.append(a[0] / b[0])
    return ratios


def paired_table(p: PairedRuns, *, title: str) -> Table:
    sides = [("this checkout", p.this)] + ([(p.against or "", p.other)] if p.other else [])
    columns = ["endpoint", "figure", *(name for name, _ in sides)]
    if p.other:
        columns.append("ratio (this / other)")
    table = figures_table(title, tuple(columns), labels={"endpoint", "figure"})
    endpoints = [r.endpoint for r in p.this[0]] if p.this else []
    for e in endpoints:
        rows: list[tuple[str, list[float], int]] = [
            (
                "server CPU ms per message",
                [_median(r, e, "cpu_ms_per_message") for _, r in sides],
                2,
            ),
            ("messages/s", [_median(r, e, "throughput") for _, r in sides], 0),
            ("latency p50 (ms)", [_p(r, e, 0.5) for _, r in sides], 1),
            ("latency p99 (ms)", [_p(r, e, 0.99) for _, r in sides], 1),
        ]
        for name, values, digits in rows:
            cells = [f"{v:,.{digits}f}" for v in values]
            if p.other:
                cells.append(f"{values[0] / values[1]:.2f}x" if values[1] else "-")
            table.add_row(e, name, *cells)
        if p.other:  # each round's pair ran back to back: the steadiest comparison
            ratios = _round_ratios(p, e)
            table.add_row(
                e,
                "CPU per message, this / other, each round (median)",
                ", ".join(f"{x:.2f}" for x in ratios),
                "",
                f"{statistics.median(ratios):.2f}x" if ratios else "-",
            )
        faults = [_faults(r, e) for _, r in sides]
        table.add_row(
            e, "failed / lost / duplicated / reordered", *faults, *([""] if p.other else [])
        )
        each = [
            ", ".join(f"{r.cpu_ms_per_message:.2f}" for run in runs for r in run if r.endpoint == e)
            for _, runs in sides
        ]
        table.add_row(e, "CPU ms per message, each run", *each, *([""] if p.other else []))
    return table
