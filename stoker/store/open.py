"""A store from one location string, as a user writes it in a flag or a variable.

The location is always given: a program resolves it once (`stoker.config.Config.database`,
which defaults to `stoker.db` in the Stoker home) and passes it here, so a library call
never picks a database from the environment behind its caller's back.
"""

from __future__ import annotations

from pathlib import Path

from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore


def open_store(location: str | Path) -> SqlEventStore:
    """A store for `location`: a SQLite path, `sqlite:///path`, or `postgresql://...`."""
    target = str(location)
    if target.startswith(("postgresql://", "postgres://")):
        return PostgresStore(target)
    return SQLiteStore(target.removeprefix("sqlite:///"))
