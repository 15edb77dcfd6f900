"""Group commit, on both backends: concurrent writes share transactions, and each is
acknowledged only once committed; a write that fails fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import psycopg
import pytest

from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from stoker.wire.events import MessageAppended, SessionCreated
from stoker.wire.messages import user_text
from tests.helpers import sim_agent


async def test_concurrent_writes_share_commits_and_all_are_stored(store: SqlEventStore) -> None:
    prefix = sim_agent()[0].build_prefix()
    sids = [f"s{i}" for i in range(10)]
    await asyncio.gather(*(store.emit(SessionCreated(session_id=s, prefix=prefix)) for s in sids))
    transactions = 0
    # what runs one transaction: SQLite's commit of a batch, PostgreSQL's pool transaction
    owner = store if isinstance(store, SQLiteStore) else store.connections  # type: ignore[attr-defined]
    name = "_commit" if isinstance(store, SQLiteStore) else "transaction"
    run = getattr(owner, name)

    def counted(*args: Any) -> Any:
        nonlocal transactions
        transactions += 1
        return run(*args)

    setattr(owner, name, counted)

    async def write(sid: str) -> None:
        for i in range(5):
            text = user_text(f"{sid} {i}")
            await store.emit(MessageAppended(session_id=sid, index=i, message=text))

    await asyncio.gather(*(write(s) for s in sids))
    assert transactions < 50  # ten sessions' writes waiting at once went out together
    for s in sids:
        stored = await store.load(s)
        assert [m.prompt for m in stored.messages] == [f"{s} {i}" for i in range(5)]


async def test_a_failing_write_fails_alone(store: SqlEventStore) -> None:
    duplicate = sqlite3.IntegrityError if isinstance(store, SQLiteStore) else psycopg.IntegrityError
    prefix = sim_agent()[0].build_prefix()
    await store.emit(SessionCreated(session_id="taken", prefix=prefix))
    again = store.emit(SessionCreated(session_id="taken", prefix=prefix))  # a duplicate id
    fresh = [store.emit(SessionCreated(session_id=f"new{i}", prefix=prefix)) for i in range(5)]
    results = await asyncio.gather(again, *fresh, return_exceptions=True)
    assert isinstance(results[0], duplicate)
    assert results[1:] == [None] * 5
    assert {s.id for s in await store.list_sessions()} == {"taken", *(f"new{i}" for i in range(5))}
    with pytest.raises(duplicate):  # alone in its transaction, the same error
        await store.emit(SessionCreated(session_id="taken", prefix=prefix))
