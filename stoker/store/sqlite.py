"""SQLite backend: one file, WAL mode, writes on one dedicated thread.

Each write is one `BEGIN IMMEDIATE` transaction, taken before reading (so two processes
never deadlock upgrading a lock), and runs shielded from cancellation: a caller that is
cancelled mid-write does not lose an event the database was already committing.

Group commit: writes that arrive while the thread is busy wait in a queue, and the next
transaction takes all of them, each in a savepoint of its own (a write that fails rolls
back alone and its caller gets the error; the others commit). Every caller still returns
only once its write is committed, so what is acknowledged is durable, as before; a
gateway's hundred concurrent sessions then cost a few commits and thread hand-offs, not
one per event.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from stoker.errors import StoreError
from stoker.store._group import Batch, GroupCommit
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
        self._group = GroupCommit(self._commit_in_thread)

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
        await self._group.write(ops)

    async def _commit_in_thread(self, batch: Batch) -> list[BaseException | None]:
        return await self._call(partial(self._commit, batch))

    def _commit(self, batch: Batch) -> list[BaseException | None]:
        """One transaction, each write in a savepoint; the error of each (None: written)."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        errors: list[BaseException | None] = []
        try:
            for ops in batch:
                if len(batch) > 1:
                    conn.execute("SAVEPOINT w")
                try:
                    for sql, params in ops:
                        self.stats.note(sql)
                        conn.execute(sql, params)
                except sqlite3.Error as exc:
                    if len(batch) == 1:
                        raise
                    conn.execute("ROLLBACK TO w")
                    conn.execute("RELEASE w")
                    errors.append(exc)
                    continue
                if len(batch) > 1:
                    conn.execute("RELEASE w")
                errors.append(None)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return errors

    async def _raw_read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            self.stats.note(sql)
            return self._connection().execute(sql, params).fetchall()

        return await self._call(run)

    async def close(self) -> None:
        await self._group.drain()  # what was acknowledged as queued is written first

        def run() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._call(run)
        self._executor.shutdown(wait=True)
