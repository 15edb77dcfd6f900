"""PostgreSQL backend (psycopg 3), for sessions shared by several processes or replicas.

One connection per store, one transaction per write, shielded from cancellation like
the SQLite backend. `schema` isolates a deployment (or a test) in its own namespace.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from stoker.config import redact_dsn
from stoker.errors import StoreError
from stoker.store.base import Op, SqlEventStore, StoreStats

_SAFE_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class PostgresStore(SqlEventStore):
    def __init__(self, dsn: str, *, schema: str | None = None, trace: bool = False) -> None:
        if schema is not None and not _SAFE_SCHEMA.match(schema):
            raise StoreError(f"schema name {schema!r} must match {_SAFE_SCHEMA.pattern}")
        self.dsn = dsn
        self.schema = schema
        self.stats = StoreStats(trace=trace)
        self._locks: dict[str, asyncio.Lock] = {}
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._ready = False
        self._init_lock = asyncio.Lock()

    async def _connection(self) -> Any:
        if self._conn is None:
            try:
                import psycopg
            except ImportError as exc:
                raise StoreError(
                    "PostgreSQL needs the psycopg package: pip install 'stoker[postgres]'"
                ) from exc
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            except psycopg.Error as exc:
                raise StoreError(
                    f"cannot connect to PostgreSQL at {redact_dsn(self.dsn)}: {exc}"
                ) from exc
            if self.schema:
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                await conn.execute(f'SET search_path TO "{self.schema}"')
            self._conn = conn
        return self._conn

    async def _raw_write(self, ops: Sequence[Op]) -> None:
        async def run() -> None:
            async with self._lock:
                conn = await self._connection()
                # Pipeline mode sends the statements without waiting for each reply.
                async with conn.transaction(), conn.pipeline():
                    for sql, params in ops:
                        self.stats.note(sql)
                        await conn.execute(_pg(sql), params)

        await asyncio.shield(run())

    async def _raw_read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        async with self._lock:
            conn = await self._connection()
            self.stats.note(sql)
            cursor = await conn.execute(_pg(sql), params)
            return list(await cursor.fetchall())

    @asynccontextmanager
    async def _advisory(self, session_id: str) -> AsyncIterator[None]:
        # try-lock in a loop: a blocking pg_advisory_lock would stall this store's one
        # connection for every other session while another replica holds the lock
        key = "stoker:" + session_id
        while True:
            rows = await self._read("SELECT pg_try_advisory_lock(hashtext(?))", (key,))
            if rows[0][0]:
                break
            await asyncio.sleep(0.02)
        try:
            yield
        finally:
            await self._read("SELECT pg_advisory_unlock(hashtext(?))", (key,))

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
        conn = await self._connection()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
