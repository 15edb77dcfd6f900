"""SQLite backend: one file, WAL mode, writes on one dedicated thread.

Each write is one `BEGIN IMMEDIATE` transaction, taken before reading (so two processes
never deadlock upgrading a lock), and runs shielded from cancellation: a caller that is
cancelled mid-write does not lose an event the database was already committing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from stoker.errors import StoreError
from stoker.store._sql import Op
from stoker.store.base import SqlEventStore, StoreStats

T = TypeVar("T")


class SQLiteStore(SqlEventStore):
    """Sessions in one SQLite file (created, with its folder, on first use)."""

    def __init__(self, path: str | Path, *, trace: bool = False) -> None:
        self.path = Path(path)
        self.stats = StoreStats(trace=trace)
        self._locks: dict[str, asyncio.Lock] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stoker-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._ready = False
        self._init_lock = asyncio.Lock()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(
                    f"cannot open the session database {self.path}: {exc}; "
                    "set STOKER_DB to a writable path"
                ) from exc
            # The timeout first: switching a new file to WAL takes a lock that another
            # process opening it at the same moment may hold.
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL
            self._conn = conn
        return self._conn

    async def _call(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        return await asyncio.shield(loop.run_in_executor(self._executor, fn))

    async def _raw_write(self, ops: Sequence[Op]) -> None:
        def run() -> None:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in ops:
                    self.stats.note(sql)
                    conn.execute(sql, params)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

        await self._call(run)

    async def _raw_read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            self.stats.note(sql)
            return self._connection().execute(sql, params).fetchall()

        return await self._call(run)

    async def close(self) -> None:
        def run() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._call(run)
        self._executor.shutdown(wait=True)
