"""The chat platforms' tables, on SQLite and PostgreSQL: an update is accepted once by
whichever process or replica stores it first, stays pending until finished, and a chat
key moves between sessions."""

from __future__ import annotations

import asyncio

from stoker.store.base import SqlEventStore
from stoker.store.platform_log import PendingUpdate
from stoker.store.schema import LATEST
from tests.store_fixtures import reopen


async def test_an_update_is_accepted_once_across_store_objects(store: SqlEventStore) -> None:
    other = reopen(store)
    try:
        assert [await s.schema_version() for s in (store, other)] == [LATEST, LATEST]
        results = await asyncio.gather(
            *(s.accept_update("telegram", "1001", chat="c", body="{}") for s in (store, other)),
        )
        assert sorted(results) == [False, True]
        assert not await store.accept_update("telegram", "1001", chat="c", body="{}")
        assert await store.accept_update("slack", "1001", chat="c", body="{}")  # own keys
    finally:
        await other.close()


async def test_pending_updates_survive_a_restart_until_finished(store: SqlEventStore) -> None:
    for key, body in (("7", '{"a":1}'), ("8", '{"b":2}'), ("9", '{"c":3}')):
        assert await store.accept_update("telegram", key, chat=f"chat{key}", body=body)
    await store.mark_delivered("telegram", "9", 2)
    await store.finish_update("telegram", "8")
    assert [await store.is_pending("telegram", k) for k in ("7", "8", "10")] == [
        True,
        False,
        False,
    ]
    again = reopen(store)
    try:
        assert await again.pending_updates("telegram") == [
            PendingUpdate(key="7", chat="chat7", body='{"a":1}'),
            PendingUpdate(key="9", chat="chat9", body='{"c":3}'),
        ]
        assert await again.pending_updates("slack") == []
        assert not await again.accept_update("telegram", "8", chat="chat8", body="{}")
        assert [await again.delivered("telegram", k) for k in ("7", "9", "10")] == [0, 2, 0]
    finally:
        await again.close()


async def test_a_chat_moves_to_a_new_session_and_a_deleted_one_lets_it_go(
    store: SqlEventStore,
) -> None:
    assert await store.chat_session("telegram", "1//2") is None
    await store.bind_chat("telegram", "1//2", "s-one")
    await store.bind_chat("telegram", "1//2", "s-two")
    await store.bind_chat("telegram", "3//4", "s-three")
    assert [await store.chat_session("telegram", k) for k in ("1//2", "3//4")] == [
        "s-two",
        "s-three",
    ]
    await store.delete("s-two")
    assert await store.chat_session("telegram", "1//2") is None
    assert await store.chat_session("slack", "3//4") is None


async def test_the_latest_update_of_each_chat_newest_chat_first(store: SqlEventStore) -> None:
    accepted = [("101", "c1//u1"), ("102", "c2//u1"), ("103", "c1//u2"), ("104", "c1//u1")]
    for key, chat in accepted:
        assert await store.accept_update("discord", key, chat=chat, body="{}")
        await asyncio.sleep(0.002)  # received_at orders them
    await store.finish_update("discord", "104")  # finished or not, it was seen
    assert await store.accept_update("telegram", "105", chat="c9//u9", body="{}")
    assert await store.latest_updates("discord") == [
        ("c1//u1", "104"),
        ("c1//u2", "103"),
        ("c2//u1", "102"),
    ]
    assert await store.latest_updates("discord", chats=1) == [("c1//u1", "104")]
    assert await store.latest_updates("slack") == []
