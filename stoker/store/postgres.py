"""PostgreSQL backend (psycopg 3), for sessions shared by several processes or replicas.

Statements run on a connection pool (`postgres_pool.py`): different sessions' reads and
writes run at once, broken connections are replaced, and an unreachable database is a
`StoreUnavailable` after a bounded wait. Writes are group-committed like the SQLite
backend's (`_group.py`): the writes of concurrent turns that wait together go out in one
transaction, one round trip in pipeline mode, and each caller returns once it is
committed; shielded from cancellation. `schema` isolates a deployment (or a test) in its
own namespace.

Several replicas starting together migrate once: the migration runs in one transaction
under a transaction-scoped advisory lock, so the others wait for it and then find the
schema current.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from stoker.errors import ConcurrentWrite, StoreError, StoreUnavailable
from stoker.store._group import Batch, GroupCommit
from stoker.store._sql import Op
from stoker.store.base import SqlEventStore, StoreStats
from stoker.store.postgres_pool import Connections, PoolSettings
from stoker.store.schema import VERSION_TABLE

_SAFE_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_UNLOCK = "SELECT pg_advisory_unlock(hashtext(%s))"
LOCK_POLL = (0.005, 0.1)  # first and longest pause between tries for a busy session lock
log = logging.getLogger(__name__)


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class PostgresStore(SqlEventStore):
    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        trace: bool = False,
        pool: PoolSettings | None = None,
    ) -> None:
        if schema is not None and not _SAFE_SCHEMA.match(schema):
            raise StoreError(f"schema name {schema!r} must match {_SAFE_SCHEMA.pattern}")
        self.dsn = dsn
        self.schema = schema
        self.stats = StoreStats(trace=trace)
        self._locks: dict[str, asyncio.Lock] = {}
        self.connections = Connections(dsn, schema=schema, settings=pool or PoolSettings())
        self._ready = False
        self._init_lock = asyncio.Lock()
        self._group = GroupCommit(self._commit)

    async def _migrate(self) -> None:
        ops: list[Op] = []

        async def work(conn: Any) -> None:
            # Serializes concurrent first starts of every replica on this database.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._lock_space,))
            if self.schema:
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            await conn.execute(VERSION_TABLE)
            cursor = await conn.execute("SELECT MAX(version) FROM stoker_schema")
            row = await cursor.fetchone()
            ops[:] = self._migration_ops((row[0] if row else None) or 0)
            for sql, params in ops:
                self.stats.note(sql)
                await conn.execute(_pg(sql), params)

        await self.connections.transaction(work)
        if ops:
            log.info("migrated the PostgreSQL store (%d statements)", len(ops))

    @property
    def _lock_space(self) -> str:
        return f"stoker-migrate:{self.schema or ''}"

    async def _raw_write(self, ops: Sequence[Op]) -> None:
        await self._group.write(ops)

    async def _commit(self, batch: Batch) -> list[BaseException | None]:
        """The writes waiting together, in one transaction. When it fails, none of them
        was written, and each runs again in a transaction of its own, so only the write
        at fault fails (a conflict on one session does not fail the others')."""
        if len(batch) > 1:
            from psycopg import Error  # psycopg is there: the pool opened

            try:
                await self._send([op for ops in batch for op in ops])
            except StoreUnavailable:
                raise  # the connection broke: whether it committed is unknown
            except Error:
                log.debug("a batch of %d writes failed; each runs alone", len(batch))
            else:
                return [None] * len(batch)
        return [await _error_of(self._transaction(ops)) for ops in batch]

    async def _send(self, ops: Sequence[Op]) -> None:
        """`ops` in one transaction; pipeline mode sends them without waiting for each reply."""

        async def work(conn: Any) -> None:
            async with conn.pipeline():
                for sql, params in ops:
                    self.stats.note(sql)
                    await conn.execute(_pg(sql), params)

        await self.connections.transaction(work)

    async def _transaction(self, ops: Sequence[Op]) -> None:
        """One write in a transaction of its own, its errors as the store's."""
        from psycopg.errors import UniqueViolation  # psycopg is there: the pool opened

        try:
            await self._send(ops)
        except UniqueViolation as exc:
            # Two writers numbered the same event: only when a session's lock was lost.
            if exc.diag.table_name != "events":
                raise
            event = next((p for sql, p in reversed(ops) if "INTO events" in sql), ops[-1][1])
            raise ConcurrentWrite(str(event[0])) from None

    async def _raw_read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        self.stats.note(sql)
        return await self.connections.query(_pg(sql), params)

    async def ping(self) -> int:
        """The schema version, read through the pool: whether the store answers now."""
        return await self.schema_version()

    @asynccontextmanager
    async def _advisory(self, session_id: str) -> AsyncIterator[None]:
        # try-lock in a loop: the lock connection is shared by every session of this
        # process, and a blocking pg_advisory_lock would stall it for all of them
        key = f"stoker:{self.schema or ''}:{session_id}"
        pause = LOCK_POLL[0]
        while True:
            taken, generation = await self.connections.lock_statement(
                "SELECT pg_try_advisory_lock(hashtext(%s))", key, undo=_UNLOCK
            )
            if taken:
                break
            await asyncio.sleep(pause)
            pause = min(pause * 2, LOCK_POLL[1])
        try:
            yield
        finally:
            await asyncio.shield(self._unlock(key, generation))

    async def _unlock(self, key: str, generation: int) -> None:
        if generation != self.connections.generation:
            log.warning("the lock of %s was lost with its connection before it ended", key)
            return
        try:
            await self.connections.lock_statement(_UNLOCK, key)
        except StoreError as exc:  # the connection died: the server released the lock
            log.info("could not unlock %s (%s); its connection's end released it", key, exc)

    @asynccontextmanager
    async def _both(self, session_id: str) -> AsyncIterator[None]:
        async with self._local_lock(session_id), self._advisory(session_id):
            yield

    def session_lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """In-process lock plus a PostgreSQL advisory lock: one turn at a time per session
        across every replica sharing this database."""
        return self._both(session_id)

    async def drop_schema(self) -> None:
        """Remove this store's schema and everything in it (tests, throwaway deployments)."""
        if not self.schema:
            raise StoreError("drop_schema() needs a store opened with an explicit schema")
        await self.connections.query(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE', ())

    async def close(self) -> None:
        await self._group.drain()  # what was acknowledged as queued is written first
        await self.connections.close()


async def _error_of(write: Awaitable[None]) -> BaseException | None:
    try:
        await write
    except Exception as exc:
        return exc
    return None
