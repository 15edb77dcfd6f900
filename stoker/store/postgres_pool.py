"""Connections to PostgreSQL for one process: a pool for statements, one for locks.

Statements run on a `psycopg_pool` pool, so reads and writes of different sessions run
at once. A connection that broke (a database restart, a failover, a pooler's idle
timeout) is discarded and the statement runs again on a fresh one when that is safe: a
read always, a write only when it failed before its transaction began, so a write the
server may have committed is never sent twice. When no connection can be had within
`wait` seconds the caller gets `StoreUnavailable` (the gateway answers 503), never a hang.

Session locks are PostgreSQL advisory locks, which belong to the connection that took
them: the server releases them when that connection dies, so a replica killed mid-turn
never leaves a session locked. They are all held on one connection per process (a
connection may hold any number of them) instead of one pooled connection per turn,
which would let waiting turns exhaust the pool that running turns need to write.
Statements asked for while that connection is busy wait together and go in one pipeline,
in the order asked: a busy gateway takes and releases its sessions' locks in one round
trip per batch, not two per turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from stoker.config import redact_dsn
from stoker.errors import StoreError, StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
ATTEMPTS = 3  # a statement's tries on fresh connections after a broken one
# A lock statement waiting for its batch: (statement, key, its undo, the caller's future).
_LockStatement = tuple[str, str, str | None, asyncio.Future[tuple[bool, int]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSettings:
    """How many connections a process keeps and how long a request waits for one.

    `wait` bounds every wait on the database: a request during an outage fails after
    it (503 with Retry-After) instead of hanging; it is also the connect timeout.
    """

    size: int = 10
    min_size: int = 1
    wait: float = 5.0


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise StoreError(
            "PostgreSQL needs psycopg and psycopg-pool: pip install 'stoker[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


class Connections:
    """The pool and the lock connection of one store, opened on first use."""

    def __init__(self, dsn: str, *, schema: str | None, settings: PoolSettings) -> None:
        self.dsn = dsn
        self.schema = schema
        self.settings = settings
        self._pool: Any = None
        self._open_lock = asyncio.Lock()
        self._locker: Any = None
        self._lock_queue: list[_LockStatement] = []
        self._lock_runner: asyncio.Task[None] | None = None
        self.generation = 0  # bumped when the lock connection is replaced: its locks are gone

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(redact_dsn(self.dsn), str(exc) or type(exc).__name__)

    async def _configure(self, conn: Any) -> None:
        if self.schema:
            await conn.execute(f'SET search_path TO "{self.schema}"')

    async def pool(self) -> Any:
        if self._pool is None:
            async with self._open_lock:
                if self._pool is None:
                    _, psycopg_pool = _psycopg()
                    wait = self.settings.wait
                    pool = psycopg_pool.AsyncConnectionPool(
                        self.dsn,
                        min_size=min(self.settings.min_size, self.settings.size),
                        max_size=self.settings.size,
                        kwargs={"autocommit": True, "connect_timeout": max(1, round(wait))},
                        configure=self._configure,
                        timeout=wait,
                        # Give up reconnecting in the background soon: the next request
                        # then starts a fresh attempt at once, so recovery after an outage
                        # takes one connect, not an exponential backoff grown during it.
                        reconnect_timeout=wait,
                        open=False,
                        name="stoker",
                    )
                    await pool.open(wait=False)
                    self._pool = pool
        return self._pool

    async def query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Rows of one statement outside a transaction; retried on a fresh connection
        after a broken one (a read changes nothing, so running it again is safe)."""

        async def work(conn: Any) -> list[tuple[Any, ...]]:
            cursor = await conn.execute(sql, params)
            return list(await cursor.fetchall()) if cursor.description else []

        return await self._attempts(work, transaction=False)

    async def transaction(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """`work(connection)` inside one transaction. Retried only when the connection
        failed before the transaction began: after BEGIN the server may have committed,
        and a write must never be sent twice."""
        return await self._attempts(work, transaction=True)

    async def _attempts(self, work: Callable[[Any], Awaitable[T]], *, transaction: bool) -> T:
        psycopg, psycopg_pool = _psycopg()
        pool = await self.pool()
        for attempt in range(ATTEMPTS):
            began = False
            try:
                async with pool.connection() as conn:
                    if not transaction:
                        return await work(conn)
                    async with conn.transaction():  # BEGIN: fails on a broken connection
                        began = True
                        return await work(conn)
            except psycopg_pool.PoolTimeout as exc:
                raise self._unavailable(exc) from None
            except psycopg.OperationalError as exc:
                if began or attempt == ATTEMPTS - 1:
                    raise self._unavailable(exc) from None
                log.info("a PostgreSQL connection broke (%s); trying a fresh one", exc)
                await pool.check()  # drop the other connections the restart broke too
        raise AssertionError("unreachable")

    # -- the lock connection -------------------------------------------------------------

    async def lock_statement(
        self, sql: str, key: str, *, undo: str | None = None
    ) -> tuple[bool, int]:
        """Run one advisory-lock statement on the lock connection: (its result, the
        connection's generation). A broken lock connection is replaced.

        The statement runs even if the caller stops waiting (its batch may be on the
        wire); `undo` is what then gives back what it took, so a lock taken for a caller
        that was cancelled is released rather than held until the process exits."""
        done: asyncio.Future[tuple[bool, int]] = asyncio.get_running_loop().create_future()
        self._lock_queue.append((sql, key, undo, done))
        if self._lock_runner is None or self._lock_runner.done():
            self._lock_runner = asyncio.create_task(self._run_lock_statements())
        return await done

    async def _run_lock_statements(self) -> None:
        """Each batch of waiting statements in one round trip, in the order they came."""
        while self._lock_queue:
            batch, self._lock_queue = self._lock_queue, []
            try:
                results, generation = await self._locker_run([(q, k) for q, k, _, _ in batch])
            except Exception as exc:
                for *_, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            except BaseException:  # cancelled (the loop is closing): nobody is told
                for *_, done in batch:
                    done.cancel()
                raise
            for (_, key, undo, done), taken in zip(batch, results, strict=True):
                if not done.done():
                    done.set_result((taken, generation))
                elif taken and undo is not None:  # its caller left: give it back
                    gone = asyncio.get_running_loop().create_future()
                    self._lock_queue.append((undo, key, None, gone))

    async def _locker_run(self, statements: Sequence[tuple[str, str]]) -> tuple[list[bool], int]:
        psycopg, _ = _psycopg()
        try:
            if self._locker is None or self._locker.closed:
                if self._locker is not None:
                    self.generation += 1  # the server released its locks with it
                self._locker = await psycopg.AsyncConnection.connect(
                    self.dsn,
                    autocommit=True,
                    connect_timeout=max(1, round(self.settings.wait)),
                )
            conn = self._locker
            if len(statements) == 1:
                cursors = [await conn.execute(statements[0][0], (statements[0][1],))]
            else:
                async with conn.pipeline():  # sent together; the replies read at its end
                    cursors = [await conn.execute(sql, (key,)) for sql, key in statements]
            rows = [await cursor.fetchone() for cursor in cursors]
        except psycopg.OperationalError as exc:
            if self._locker is not None:
                await self._locker.close()
            raise self._unavailable(exc) from None
        return [bool(row[0]) if row else False for row in rows], self.generation

    async def close(self) -> None:
        if self._locker is not None:
            await self._locker.close()
            self._locker = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
