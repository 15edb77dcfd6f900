"""A store from one location string, as a user writes it in a flag or a variable.

The location is always given: a program resolves it once (`stoker.config.Config.database`,
which defaults to `stoker.db` in the Stoker home) and passes it here, so a library call
never picks a database from the environment behind its caller's back.

A SQLite file that does not exist is created, with its folder, on first use: whether a
program may do that is its own decision, made before it opens the store
(`stoker.cli.settings.reading` refuses a missing file for the commands that only read).
"""

from __future__ import annotations

from pathlib import Path

from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.postgres_pool import PoolSettings
from stoker.store.sqlite import SQLiteStore

IN_MEMORY = ":memory:"
"""A SQLite location that is no file: an empty database that lives as long as its store."""


def sqlite_path(location: str | Path) -> Path | None:
    """The file a SQLite location (a path or `sqlite:///path`) names; None for a server's
    DSN and for `IN_MEMORY`."""
    target = str(location)
    if target.startswith(("postgresql://", "postgres://")):
        return None
    target = target.removeprefix("sqlite:///")
    return None if target in ("", IN_MEMORY) else Path(target)


def open_store(location: str | Path, *, pool: PoolSettings | None = None) -> SqlEventStore:
    """A store for `location`: a SQLite path, `sqlite:///path`, or `postgresql://...`
    (with `pool`: its connection pool's size and wait), or `IN_MEMORY`."""
    target = str(location)
    if target.startswith(("postgresql://", "postgres://")):
        return PostgresStore(target, pool=pool)
    return SQLiteStore(target.removeprefix("sqlite:///"))
