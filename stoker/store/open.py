"""A store from one location string, as a user writes it in a flag or a variable.

The location is always given: a program resolves it once (`stoker.config.Config.database`,
which defaults to `stoker.db` in the Stoker home) and passes it here, so a library call
never picks a database from the environment behind its caller's back.
"""

from __future__ import annotations

from pathlib import Path

from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.postgres_pool import PoolSettings
from stoker.store.sqlite import SQLiteStore


def open_store(location: str | Path, *, pool: PoolSettings | None = None) -> SqlEventStore:
    """A store for `location`: a SQLite path, `sqlite:///path`, or `postgresql://...`
    (with `pool`: its connection pool's size and wait)."""
    target = str(location)
    if target.startswith(("postgresql://", "postgres://")):
        return PostgresStore(target, pool=pool)
    return SQLiteStore(target.removeprefix("sqlite:///"))
