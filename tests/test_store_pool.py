"""The PostgreSQL store under replicas: a real pool, broken connections replaced, a
bounded wait when the server is gone, one migration for many first starts, session locks
that die with their connection; and leases, on every backend."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from stoker.errors import ConcurrentWrite, StoreUnavailable
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.postgres_pool import PoolSettings
from stoker.store.schema import MIGRATIONS
from stoker.wire.events import MessageAppended, SessionCreated
from stoker.wire.messages import user_text
from stoker.wire.prefix import CacheParams, Prefix
from tests.store_fixtures import postgres_dsn


def _with(dsn: str, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{dsn}{'&' if '?' in dsn else '?'}{query}"


@pytest.fixture
async def pg() -> AsyncIterator[PostgresStore]:
    name = f"pool_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(
        _with(postgres_dsn(), application_name=name),
        schema=f"t_{uuid.uuid4().hex[:16]}",
        pool=PoolSettings(size=4, wait=3.0),
    )
    yield store
    await store.drop_schema()
    await store.close()


async def _admin(sql: str, *params: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(postgres_dsn(), autocommit=True) as conn:
        cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
        return list(await cursor.fetchall()) if cursor.description else []


async def _terminate(application_name: str) -> int:
    rows = await _admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        application_name,
    )
    return len(rows)


def _created(sid: str) -> SessionCreated:
    prefix = Prefix(params=CacheParams(model="claude-sonnet-4-6"), system="s")
    return SessionCreated(
        session_id=sid, parent_id=None, role="main", created_at=0.0, prefix=prefix, config={}
    )


async def test_reads_of_different_sessions_do_not_wait_for_each_other(pg: PostgresStore) -> None:
    await pg.emit(_created("a"))
    slow = asyncio.create_task(pg.connections.query("SELECT pg_sleep(2)", ()))
    await asyncio.sleep(0.1)  # the slow statement holds one pooled connection
    assert (await pg.head("a")) == (None, 1)
    assert not slow.done()  # answered while the other statement was still running
    await slow


async def test_a_broken_connection_is_replaced_and_nothing_written_twice(
    pg: PostgresStore,
) -> None:
    await pg.emit(_created("a"))
    name = pg.dsn.rsplit("application_name=", 1)[1]
    assert await _terminate(name) >= 1  # as a database restart or a pooler's timeout would
    await pg.emit(_created("b"))  # the write failed before BEGIN, so it ran again
    assert (await pg.head("b")) == (None, 1)
    assert [s.id for s in await pg.list_sessions()] == ["b", "a"]


async def test_an_unreachable_database_is_a_bounded_clean_error() -> None:
    dsn = f"postgresql://stoker:hunter2-secret@127.0.0.1:{_closed_port()}/stoker"
    store = PostgresStore(dsn, pool=PoolSettings(size=2, wait=1.0))
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        await store.list_sessions()
    waited = time.monotonic() - started
    await store.close()
    assert "hunter2" not in str(caught.value)
    assert "stoker:***@127.0.0.1" in str(caught.value)
    assert waited < 10  # bounded by the wait setting (and a connect attempt), not a hang


async def test_replicas_starting_together_migrate_once() -> None:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    stores = [PostgresStore(postgres_dsn(), schema=schema) for _ in range(6)]
    try:
        versions = await asyncio.gather(*(s.schema_version() for s in stores))
        assert versions == [MIGRATIONS[-1].version] * 6
        rows = await _admin(f'SELECT version FROM "{schema}".stoker_schema ORDER BY version')
        assert [v for (v,) in rows] == [m.version for m in MIGRATIONS]
    finally:
        await stores[0].drop_schema()
        for s in stores:
            await s.close()


async def test_a_session_lock_dies_with_its_connection(pg: PostgresStore) -> None:
    other = PostgresStore(pg.dsn, schema=pg.schema)
    try:
        held = asyncio.Event()
        release = asyncio.Event()

        async def holder() -> None:
            async with pg.session_lock("s"):
                held.set()
                await release.wait()

        task = asyncio.create_task(holder())
        await held.wait()
        waiting = asyncio.create_task(_locked(other, "s"))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # the lock is held by the first store's connection
        await _kill_lock_connection(pg)  # as when its replica is killed
        await asyncio.wait_for(waiting, 10)  # the server released the dead connection's lock
        release.set()
        await task
    finally:
        await other.close()


async def test_session_locks_asked_together_go_in_one_round_trip_in_order(
    pg: PostgresStore,
) -> None:
    """Lock statements that wait while the lock connection is busy go together in one
    pipeline: each gets its own answer, in the order asked (an unlock before the next
    lock of the same session), and a lock taken for a caller that stopped waiting is
    given back, not held until the process exits."""
    other = PostgresStore(pg.dsn, schema=pg.schema)
    try:
        held = [f"s{i}" for i in range(20)]
        async with contextlib.AsyncExitStack() as locks:
            await asyncio.gather(*(locks.enter_async_context(pg.session_lock(s)) for s in held))
            assert await _advisory_locks(pg) == 20
            took = await asyncio.gather(*(_try(other, s) for s in held[:3]))
            assert took == [False] * 3  # held on the first store's connection
        assert await _advisory_locks(pg) == 0
        # A caller cancelled while its try-lock is on the wire: the lock is given back.
        connections = pg.connections
        sql = "SELECT pg_try_advisory_lock(hashtext(%s))"
        unlock = "SELECT pg_advisory_unlock(hashtext(%s))"
        first = asyncio.create_task(connections.lock_statement(sql, "a", undo=unlock))
        gone = asyncio.create_task(connections.lock_statement(sql, "b", undo=unlock))
        await asyncio.sleep(0)  # both queued: one batch
        gone.cancel()
        assert (await first)[0]
        with pytest.raises(asyncio.CancelledError):
            await gone
        for _ in range(100):
            if await _advisory_locks(pg) == 1:  # "a" alone; "b" was given back
                break
            await asyncio.sleep(0.05)
        assert await _advisory_locks(pg) == 1
        assert (await connections.lock_statement(unlock, "a")) == (True, 0)
    finally:
        await other.close()


async def _try(store: PostgresStore, key: str) -> bool:
    sql = "SELECT pg_try_advisory_lock(hashtext(%s))"
    taken, _ = await store.connections.lock_statement(sql, f"stoker:{store.schema}:{key}")
    return taken


async def _advisory_locks(store: PostgresStore) -> int:
    """How many advisory locks the store's lock connection holds."""
    name = store.dsn.rsplit("application_name=", 1)[1]
    rows = await _admin(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = %s",
        name,
    )
    return int(rows[0][0])  # type: ignore[call-overload]


async def _locked(store: PostgresStore, sid: str) -> None:
    async with store.session_lock(sid):
        pass


async def _kill_lock_connection(store: PostgresStore) -> None:
    """End the connection holding the process's advisory locks."""
    name = store.dsn.rsplit("application_name=", 1)[1]
    killed = await _admin(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_stat_activity a "
        "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND a.application_name = %s",
        name,
    )
    assert killed == [(True,)]


async def test_two_writers_of_one_event_number_get_a_clear_conflict(pg: PostgresStore) -> None:
    """What a lost lock would let happen: the second writer is told, stores nothing."""
    await pg.emit(_created("a"))
    async with await psycopg.AsyncConnection.connect(postgres_dsn()) as other:
        await other.execute(f'SET search_path TO "{pg.schema}"')
        await other.execute(
            "INSERT INTO events (session_id, seq, type, created_at, body) "
            "VALUES ('a', 2, 'written_elsewhere', 0, '{}')"
        )
        racing = asyncio.create_task(
            pg.emit(MessageAppended(session_id="a", index=0, message=user_text("hi")))
        )
        await asyncio.sleep(0.3)
        assert not racing.done()  # waits on the other writer's event 2
        await other.commit()
    with pytest.raises(ConcurrentWrite, match="written by another process"):
        await racing
    assert [seq for seq, *_ in await pg.events("a")] == [1, 2]
    assert (await pg.load("a")).messages == ()
    assert [s.message_count for s in await pg.list_sessions()] == [0]  # header rolled back


async def test_leases_are_held_by_one_holder_until_they_expire(store: SqlEventStore) -> None:
    assert await store.take_lease("keep-warm:s", "replica-a", seconds=60)
    assert not await store.take_lease("keep-warm:s", "replica-b", seconds=60)
    assert await store.take_lease("keep-warm:s", "replica-a", seconds=60)  # renewed
    assert await store.take_lease("keep-warm:t", "replica-b", seconds=0.05)
    await asyncio.sleep(0.1)
    assert await store.take_lease("keep-warm:t", "replica-a", seconds=60)  # expired: taken over
    await store.drop_lease("keep-warm:s", "replica-b")  # not b's: nothing happens
    assert not await store.take_lease("keep-warm:s", "replica-b", seconds=60)
    await store.drop_leases("replica-a")
    assert await store.take_lease("keep-warm:s", "replica-b", seconds=60)
    assert await store.take_lease("keep-warm:t", "replica-b", seconds=60)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
