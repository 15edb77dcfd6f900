"""Keep-warm in the gateway: a timer per idle session that a delete, an eviction or a new
message stops, a restart that picks the timers up from the store, and two gateways on
one store that fire each keep-warm once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stoker.gateway.views import usage_view
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from tests.store_fixtures import make_store, reopen
from tests.test_gateway_support import make_rig


async def _seals(store: SqlEventStore, sid: str) -> list[dict[str, object]]:
    return [
        json.loads(body)
        for _, kind, _, body in await store.events(sid)
        if kind == "cache_recorded" and json.loads(body).get("purpose") == "seal"
    ]


async def test_an_idle_session_is_sealed_and_the_return_reads_it(store: SqlEventStore) -> None:
    rig = make_rig(store)
    gw = rig.gateway
    sid = await gw.create_session("alice")
    await gw.send("alice", sid, "read_file 'notes.md'")
    fired = await gw.keep_warm.scheduler.idle(6 * 60)
    assert [r.purpose for r in fired] == ["seal"]
    assert len(await _seals(store, sid)) == 1
    reply = await gw.send("alice", sid, "and now?")
    assert reply.requests[0]["explanation"]["verdict"] == "hit"
    usage = usage_view(await gw.view("alice", sid))  # what /usage and the dashboard show
    assert [(r["turn"], r["purpose"]) for r in usage["requests"]] == [
        (1, "turn"),
        (1, "turn"),
        (1, "seal"),
        (2, "turn"),
    ]
    assert usage["keep_warm"]["requests"] == 1
    assert usage["keep_warm"]["cost_usd"] == fired[0].cost_usd


async def test_no_keep_warm_after_delete_eviction_or_a_new_message(store: SqlEventStore) -> None:
    rig = make_rig(store)
    gw = rig.gateway
    deleted, evicted, busy = [await gw.create_session("alice") for _ in range(3)]
    for sid in (deleted, evicted, busy):
        await gw.send("alice", sid, "read_file 'notes.md'")
    await gw.delete("alice", deleted)
    gw.agents.evict(evicted, "lru")
    await gw.keep_warm.scheduler.idle(200)
    await gw.send("alice", busy, "still here")  # its old due time (270 s) passes unused
    fired = await gw.keep_warm.scheduler.idle(100)
    assert fired == []
    assert await _seals(store, evicted) == []
    assert await _seals(store, busy) == []


async def test_a_restarted_gateway_reschedules_from_the_store(store: SqlEventStore) -> None:
    rig = make_rig(store)
    sid = await rig.gateway.create_session("alice")
    await rig.gateway.send("alice", sid, "read_file 'notes.md'")
    await rig.gateway.close()  # the process stops; the store and the provider's cache stay
    again = rig.another_process(reopen(store))
    try:
        await again.start()
        assert sid in again.keep_warm.scheduler
        fired = await again.keep_warm.scheduler.idle(6 * 60)
        assert [r.purpose for r in fired] == ["seal"]
        reply = await again.send("alice", sid, "back again")
        assert reply.requests[0]["explanation"]["verdict"] == "hit"
    finally:
        await again.close()
        await again.store.close()


@pytest.fixture
async def postgres(tmp_path: Path) -> AsyncIterator[SqlEventStore]:
    """Replicas share a session only through PostgreSQL's advisory locks and leases."""
    store = make_store("postgres", tmp_path)
    yield store
    assert isinstance(store, PostgresStore)
    await store.drop_schema()
    await store.close()


async def test_two_gateways_on_one_store_fire_each_keep_warm_once(
    postgres: SqlEventStore,
) -> None:
    """Two gateways on their own connections, as two replicas are: the session's timer
    is due on both at once, and exactly one of them sends the seal."""
    store = postgres
    rig = make_rig(store)
    first = rig.gateway
    sid = await first.create_session("alice")
    await first.send("alice", sid, "read_file 'notes.md'")
    second = rig.another_process(reopen(store))
    try:
        await second.start()  # picks the session up from the store, as current as `first`
        assert sid in second.keep_warm.scheduler
        assert sid in first.keep_warm.scheduler
        due = first.keep_warm.scheduler.next_due()
        assert due is not None
        assert due == second.keep_warm.scheduler.next_due()
        rig.clock.at = due
        fired = await asyncio.gather(
            first.keep_warm.scheduler.fire_due(), second.keep_warm.scheduler.fire_due()
        )
        assert sorted(len(f) for f in fired) == [0, 1]
        assert len(await _seals(store, sid)) == 1
    finally:
        await second.close()
        await second.store.close()


async def test_a_stopping_gateway_gives_back_its_leases(store: SqlEventStore) -> None:
    rig = make_rig(store)
    gw = rig.gateway
    assert await store.take_lease("keep-warm:s", gw.replica, seconds=600)
    await gw.close()
    assert await store.take_lease("keep-warm:s", "another replica", seconds=600)
