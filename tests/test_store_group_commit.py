"""SQLite group commit: concurrent writes share transactions, and each is acknowledged
only once committed; a write that fails fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from stoker.store.sqlite import SQLiteStore
from stoker.wire.events import MessageAppended, SessionCreated
from stoker.wire.messages import user_text
from tests.helpers import sim_agent


async def test_concurrent_writes_share_commits_and_all_are_stored(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    prefix = sim_agent()[0].build_prefix()
    sids = [f"s{i}" for i in range(10)]
    await asyncio.gather(*(store.emit(SessionCreated(session_id=s, prefix=prefix)) for s in sids))
    commits = 0
    commit = store._commit  # noqa: SLF001 (counting the transactions it runs)

    def counted(batch):  # type: ignore[no-untyped-def]
        nonlocal commits
        commits += 1
        return commit(batch)

    store._commit = counted  # type: ignore[method-assign]  # noqa: SLF001

    async def write(sid: str) -> None:
        for i in range(5):
            text = user_text(f"{sid} {i}")
            await store.emit(MessageAppended(session_id=sid, index=i, message=text))

    await asyncio.gather(*(write(s) for s in sids))
    assert commits < 50  # ten sessions' writes waiting at once went out together
    for s in sids:
        stored = await store.load(s)
        assert [m.prompt for m in stored.messages] == [f"{s} {i}" for i in range(5)]
    await store.close()


async def test_a_failing_write_fails_alone(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    prefix = sim_agent()[0].build_prefix()
    await store.emit(SessionCreated(session_id="taken", prefix=prefix))
    again = store.emit(SessionCreated(session_id="taken", prefix=prefix))  # a duplicate id
    fresh = [store.emit(SessionCreated(session_id=f"new{i}", prefix=prefix)) for i in range(5)]
    results = await asyncio.gather(again, *fresh, return_exceptions=True)
    assert isinstance(results[0], sqlite3.IntegrityError)
    assert results[1:] == [None] * 5
    assert {s.id for s in await store.list_sessions()} == {"taken", *(f"new{i}" for i in range(5))}
    with pytest.raises(sqlite3.IntegrityError):  # alone in its transaction, the same error
        await store.emit(SessionCreated(session_id="taken", prefix=prefix))
    await store.close()
