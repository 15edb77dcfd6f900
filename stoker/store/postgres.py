"""PostgreSQL backend (psycopg 3), for sessions shared by several processes or replicas.

Statements run on a connection pool (`postgres_pool.py`): different sessions' reads and
writes run at once, broken connections are replaced, and an unreachable database is a
`StoreUnavailable` after a bounded wait. One transaction per write, shielded from
cancellation like the SQLite backend. `schema` isolates a deployment (or a test) in its
own namespace.

Several replicas starting together migrate once: the migration runs in one transaction
under a transaction-scoped advisory lock, so the others wait for it and then find the
schema current.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from stoker.errors import ConcurrentWrite, StoreError
from stoker.store._sql import Op
from stoker.store.base import SqlEventStore, StoreStats
from stoker.store.postgres_pool import Connections, PoolSettings
from stoker.store.schema import VERSION_TABLE

_SAFE_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
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
        async def work(conn: Any) -> None:
            # Pipeline mode sends the statements without waiting for each reply.
            async with conn.pipeline():
                for sql, params in ops:
                    self.stats.note(sql)
                    await conn.execute(_pg(sql), params)

        from psycopg.errors import UniqueViolation  # psycopg is there: the pool opened

        try:
            await asyncio.shield(self.connections.transaction(work))
        except UniqueViolation as exc:
            # Two writers numbered the same event: only when a session's lock was lost.
            if exc.diag.table_name != "events":
                raise
            raise ConcurrentWrite(str(ops[-1][1][0])) from None

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
                "SELECT pg_try_advisory_lock(hashtext(%s))", key
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
            await self.connections.lock_statement("SELECT pg_advisory_unlock(hashtext(%s))", key)
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
        await self.connections.close()
