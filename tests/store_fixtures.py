"""Store fixtures: every contract test runs on SQLite and on a real PostgreSQL server.

PostgreSQL tests need STOKER_TEST_DATABASE_URL (`.ci/run` starts a server and sets it).
Outside CI they are skipped without it; in CI (CI=true) a missing server is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore

BACKENDS = ["sqlite", "postgres"]


def postgres_dsn() -> str:
    dsn = os.environ.get("STOKER_TEST_DATABASE_URL")
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI=true but STOKER_TEST_DATABASE_URL is not set: .ci/run must start PostgreSQL"
            )
        pytest.skip("set STOKER_TEST_DATABASE_URL (scripts/pg-test-server start) for PostgreSQL")
    return dsn


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
