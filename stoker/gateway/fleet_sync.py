"""One fleet across replicas: each gateway hands its fleet notes to the others through
the store, every few seconds.

A load balancer gives each replica a share of an agent's new sessions. Alone, each would
shard OpenAI keys for its share of the rate (together passing the ~15 requests a minute
per key where the provider overflows to cold machines) and would keep the shared
tools+system entry warm for its own last session (so several replicas ping the same
entry, or none does when the last user's replica went quiet). With the notes of every
replica absorbed, each `KeyShards` counts the whole rate and each `FleetWatch` names one
last user for the whole deployment (`stoker.cache.fleet_notes`).

The sync is best effort: while the store is down a replica decides from what it has
(its own notes wait in a bounded outbox). On a `FrozenClock` it is a `Timer` its holder
steps through (`FrozenClock.pass_time`); on a real clock, a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from stoker.cache.fleet import FleetWatch
from stoker.cache.fleet_notes import KINDS, FleetNote, Outbox
from stoker.cache.keys import KeyShards
from stoker.clock import Clock, FrozenClock
from stoker.errors import StoreError
from stoker.store.base import SqlEventStore
from stoker.store.fleet_log import NoteRow

log = logging.getLogger(__name__)

SYNC_SECONDS = 0.5  # how stale another replica's view of this one may be, under traffic
QUIET_SECONDS = 8.0  # the longest pause between syncs once nothing moves (doubling up to it)
CALM_AFTER = 30.0  # nothing noted by anyone this long: the fleet is quiet, back off
LATE_SECONDS = 30.0  # read back this far: a write visible late is still read (once)
HISTORY_SECONDS = 21_600.0  # a starting replica learns this much of the fleet's past
PRUNE_SECONDS = 600.0  # how often a replica deletes notes older than the history


def _row(note: FleetNote) -> NoteRow:
    return (
        note.kind,
        note.digest,
        note.at,
        note.scope,
        note.shard,
        note.session,
        note.live_for,
        note.units,
    )


def _note(row: NoteRow) -> FleetNote | None:
    kind, digest, at, scope, shard, session, live_for, units = row
    if kind not in KINDS:
        return None  # written by a newer Stoker: not ours to read
    return FleetNote(
        kind=kind,
        digest=digest,
        at=at,
        scope=scope,
        shard=shard,
        session=session,
        live_for=live_for,
        units=units,
    )


class FleetSync:
    """Writes this replica's fleet notes to the store and absorbs everyone else's."""

    def __init__(
        self,
        store: SqlEventStore,
        *,
        shards: KeyShards,
        fleet: FleetWatch,
        holder: str,
        clock: Clock,
        every: float = SYNC_SECONDS,
    ) -> None:
        self.store = store
        self.shards = shards
        self.fleet = fleet
        self.holder = holder
        self.clock = clock
        self.every = every
        self.outbox = Outbox()
        shards.share(self.outbox)
        fleet.share(self.outbox)
        self._seq = 0
        self._cursor = clock.now() - HISTORY_SECONDS
        self._seen: dict[tuple[str, int], float] = {}
        self._due = clock.now()
        self._pause = every
        self._moved_at = clock.now()
        self._next_prune = clock.now()
        self._task: asyncio.Task[None] | None = None

    async def sync(self) -> int:
        """Write what this replica noted, absorb what the others wrote since the last
        sync; how many of their notes were new. Raises `StoreError` if the store is down
        (the unwritten notes stay for the next sync)."""
        now = self.clock.now()
        self._due = now + self._pause
        notes = self.outbox.drain()
        try:
            await self.store.add_fleet_notes(
                self.holder, self._seq, [_row(n) for n in notes], written_at=now
            )
        except BaseException:
            self.outbox.restore(notes)  # for the next sync, in order, within the bound
            raise
        self._seq += len(notes)
        rows = await self.store.fleet_notes_since(self._cursor, besides=self.holder)
        absorbed = 0
        newest = self._cursor
        for holder, seq, written_at, row in rows:
            newest = max(newest, written_at)
            if (holder, seq) in self._seen:
                continue
            self._seen[(holder, seq)] = written_at
            note = _note(row)
            if note is not None:
                self.shards.absorb(note)
                self.fleet.absorb(note)
                absorbed += 1
        # Under traffic sync often (the others decide on this view); when nothing moves,
        # back off: the first note after a pause waits at most QUIET_SECONDS.
        if notes or absorbed:
            self._moved_at = now
        if now - self._moved_at < CALM_AFTER:
            self._pause = self.every
        else:
            self._pause = min(self._pause * 2, max(self.every, QUIET_SECONDS))
        self._due = now + self._pause
        self._cursor = max(self._cursor, min(newest, now) - LATE_SECONDS)
        self._seen = {k: t for k, t in self._seen.items() if t >= self._cursor}
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_SECONDS
            await self.store.prune_fleet_notes(now - HISTORY_SECONDS)
        return absorbed

    # -- on a frozen clock, a Timer ----------------------------------------------------------

    def next_due(self) -> float | None:
        return self._due

    async def fire_due(self) -> list[object]:
        """Sync if due; it fires no requests, so it returns none (its due time moves)."""
        if self.clock.now() >= self._due:
            try:
                await self.sync()
            except StoreError as exc:  # its due time moved on: the next one tries again
                log.info("fleet sync skipped, the store is unavailable: %s", exc)
        return []

    # -- on a real clock, a task ---------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                await self.sync()
            except StoreError as exc:
                log.info("fleet sync skipped, the store is unavailable: %s", exc)
            except Exception as exc:  # the fleet's view goes stale; serving goes on
                log.warning("fleet sync failed: %r", exc)
            await asyncio.sleep(max(0.0, self._due - self.clock.now()))

    def start(self) -> None:
        if isinstance(self.clock, FrozenClock):
            self.clock.listen(self)
        elif self._task is None:
            self._task = asyncio.create_task(self.run(), name="stoker-fleet-sync")

    async def stop(self) -> None:
        if isinstance(self.clock, FrozenClock):
            self.clock.unlisten(self)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
