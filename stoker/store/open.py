"""Which store to use: an explicit location, else STOKER_DATABASE_URL (PostgreSQL),
else STOKER_DB (a SQLite file), else `stoker.db` in the Stoker home (`stoker.paths`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from stoker.paths import stoker_home
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    return stoker_home(env) / "stoker.db"


def open_store(
    location: str | Path | None = None, *, env: Mapping[str, str] | None = None
) -> SqlEventStore:
    """A store for `location` (a path, `sqlite:///path`, or `postgresql://...`)."""
    env = os.environ if env is None else env
    target = (
        str(location)
        if location is not None
        else (env.get("STOKER_DATABASE_URL") or env.get("STOKER_DB") or str(default_db_path()))
    )
    if target.startswith(("postgresql://", "postgres://")):
        return PostgresStore(target)
    return SQLiteStore(
        target.removeprefix("sqlite:///") if target.startswith("sqlite:///") else target
    )
