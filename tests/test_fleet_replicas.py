"""One fleet across gateway replicas (issue 30, item 11): each replica hands its fleet
notes to the others through the store, so OpenAI keys are sharded for the whole rate and
one session in the whole deployment keeps an agent's shared entry warm.

The bench's runs are the regression tests: "alone" is how replicas behaved before the
notes (each deciding from its share), and must do worse than one gateway; with the notes
shared, the replicas must do as well as one gateway at the same total rate.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.bench.fleet_replicas import (
    FleetReplicaFigures,
    NewDatabase,
    OpenStore,
    fleet_replica_run,
    shared_tokens,
    sqlite_databases,
)
from stoker.cache.fleet import FleetWatch
from stoker.cache.fleet_notes import FleetNote, Outbox
from stoker.cache.keys import KeyShards
from stoker.cli.app import app
from stoker.clock import FrozenClock
from stoker.errors import StoreError
from stoker.gateway.fleet_sync import FleetSync
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from tests.store_fixtures import make_store, reopen


@pytest.fixture
async def databases(store: SqlEventStore, tmp_path: Path) -> AsyncIterator[NewDatabase]:
    """Fresh databases on the backend of `store` (the first is `store`'s own)."""
    made: list[SqlEventStore] = []
    counter = itertools.count()
    backend = "postgres" if isinstance(store, PostgresStore) else "sqlite"

    async def new_database() -> OpenStore:
        n = next(counter)
        if n == 0:
            base = store
        else:
            folder = tmp_path / f"db{n}"
            folder.mkdir()
            base = make_store(backend, folder)
            made.append(base)

        async def open_store() -> SqlEventStore:
            return reopen(base)

        return open_store

    yield new_database
    for s in made:
        if isinstance(s, PostgresStore):
            await s.drop_schema()
        await s.close()


async def _one_together_alone(
    databases: NewDatabase, model: str, **run: Any
) -> list[FleetReplicaFigures]:
    """The same fleet run on one replica, on four that share notes, on four that do not."""
    shared = await shared_tokens(databases, model)
    return [
        await fleet_replica_run(
            databases, replicas=replicas, shared_notes=notes, shared=shared, **run
        )
        for replicas, notes in ((1, True), (4, True), (4, False))
    ]


async def test_replicas_sharing_notes_shard_openai_keys_like_one_gateway(
    databases: NewDatabase,
) -> None:
    one, together, alone = await _one_together_alone(
        databases, "gpt-5", wire="openai gpt-5 (L)", rate=60, sessions=60, tail_minutes=0
    )
    # Alone, each replica sees a quarter of the rate: too few keys, which overflow.
    assert alone.overflows > one.overflows + 10
    assert alone.first_calls_full < one.first_calls_full - 0.2
    # Sharing notes, the replicas shard for the whole rate, as one gateway does.
    assert together.keys == one.keys > 1
    assert together.overflows <= one.overflows
    assert together.first_calls_full >= one.first_calls_full


async def test_one_replica_keeps_the_shared_entry_warm_for_the_whole_fleet(
    databases: NewDatabase,
) -> None:
    one, together, alone = await _one_together_alone(
        databases, "claude-sonnet-4-6", wire="anthropic", rate=10, sessions=20, tail_minutes=11
    )
    assert one.shared_keep_warm > 0  # the fleet's entry is kept while sessions may come
    assert alone.shared_keep_warm > one.shared_keep_warm  # each replica pings it
    assert together.shared_keep_warm == one.shared_keep_warm
    assert together.first_calls_full == one.first_calls_full == 1.0


# -- the notes themselves -------------------------------------------------------------------

_observation = st.tuples(
    st.sampled_from(["request", "arrival", "use"]),
    st.floats(0, 50, allow_nan=False),  # seconds after the start, in order after sorting
    st.integers(0, 3),  # shard
)


def _apply(watch: FleetWatch, shards: KeyShards, note: FleetNote) -> None:
    watch.absorb(note)
    shards.absorb(note)


@settings(max_examples=60, deadline=None)
@given(st.lists(_observation, max_size=40), st.permutations(range(40)))
def test_absorbed_notes_in_any_order_give_every_replica_the_whole_fleet(
    observations: list[tuple[str, float, int]], order: list[int]
) -> None:
    """Notes from several replicas, absorbed late and out of order, leave each replica's
    rates, arrivals and last user as one process that saw everything in order would."""
    notes = [
        FleetNote(kind=kind, digest="d", at=1000 + at, shard=shard, session=f"s{i}", live_for=300)
        for i, (kind, at, shard) in enumerate(sorted(observations, key=lambda o: o[1]))
    ]
    whole_watch, whole_shards = FleetWatch(), KeyShards()
    for note in notes:
        _apply(whole_watch, whole_shards, note)
    replica_watch, replica_shards = FleetWatch(), KeyShards()
    for i in (i for i in order if i < len(notes)):
        _apply(replica_watch, replica_shards, notes[i])
    whole, got = whole_watch.by_digest("d"), replica_watch.by_digest("d")
    if whole is None:
        assert got is None
        return
    assert got is not None
    assert list(got.arrivals) == list(whole.arrivals)
    assert got.last_use == whole.last_use
    for at in (1000 + max(n.at for n in notes), 1000 + max(n.at for n in notes) + 30):
        assert replica_shards.snapshot(at) == whole_shards.snapshot(at)


def _arrivals(watch: FleetWatch) -> list[float]:
    fleet = watch.by_digest("d")
    return list(fleet.arrivals) if fleet is not None else []


async def test_a_sync_reads_each_note_once_and_keeps_its_own_while_the_store_is_down(
    store: SqlEventStore,
) -> None:
    clock = FrozenClock()
    a_watch, b_watch = FleetWatch(), FleetWatch()
    a = FleetSync(store, shards=KeyShards(), fleet=a_watch, holder="a", clock=clock)
    other = reopen(store)
    b = FleetSync(other, shards=KeyShards(), fleet=b_watch, holder="b", clock=clock)
    try:
        a.outbox.add(FleetNote(kind="arrival", digest="d", at=clock.now()))
        a_watch.absorb(FleetNote(kind="arrival", digest="d", at=clock.now()))
        assert await a.sync() == 0
        assert await b.sync() == 1
        clock.advance(1)
        assert await b.sync() == 0  # read again within the overlap, absorbed once
        assert len(_arrivals(b_watch)) == 1

        async def down(*args: object, **kwargs: object) -> None:
            raise StoreError("the database is down")

        a.outbox.add(FleetNote(kind="arrival", digest="d", at=clock.now()))
        a.store.add_fleet_notes = down  # type: ignore[method-assign]
        with pytest.raises(StoreError):
            await a.sync()
        assert len(a.outbox) == 1  # kept for the next sync
        del a.store.add_fleet_notes
        await a.sync()
        assert len(a.outbox) == 0
        assert await b.sync() == 1
        assert len(_arrivals(b_watch)) == 2
    finally:
        await other.close()


def test_an_outbox_keeps_the_newest_notes_within_its_bound() -> None:
    box = Outbox(limit=3)
    for i in range(5):
        box.add(FleetNote(kind="arrival", digest="d", at=float(i)))
    drained = box.drain()
    assert [n.at for n in drained] == [2.0, 3.0, 4.0]
    box.add(FleetNote(kind="arrival", digest="d", at=9.0))
    box.restore(drained)
    assert [n.at for n in box.drain()] == [3.0, 4.0, 9.0]


async def test_each_sqlite_run_gets_a_fresh_database(tmp_path: Path) -> None:
    new_database = sqlite_databases(tmp_path)
    first, second = await new_database(), await new_database()
    a, b = await first(), await second()
    try:
        row = (("arrival", "d", 1.0, "", 0, "", 0.0, 0.0),)
        await a.add_fleet_notes("a", 0, row, written_at=1.0)
        assert len(await a.fleet_notes_since(0.0, besides="b")) == 1
        assert await b.fleet_notes_since(0.0, besides="a") == []
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--replicas", "1,2"], "one count from 2 to 16"),
        (["--replicas", "1"], "one count from 2 to 16"),
    ],
)
def test_the_fleet_bench_refuses_a_replica_count_it_cannot_run(args: list[str], says: str) -> None:
    ran = CliRunner().invoke(app, ["bench", "gateway", "--workload", "fleet", *args])
    assert ran.exit_code != 0
    assert says in ran.output


def test_the_gateway_bench_names_its_workloads() -> None:
    ran = CliRunner().invoke(app, ["bench", "gateway", "--workload", "fleets"])
    assert ran.exit_code != 0
    assert "messages or fleet" in ran.output
