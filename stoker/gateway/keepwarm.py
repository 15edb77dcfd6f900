"""Keep-warm in the gateway: a timer per idle session, safe across replicas and restarts.

Every cached session is watched after its turns (`stoker.agent.keepwarm.KeepWarm` keeps
the time; the session's time policy decides). A keep-warm is sent under the session's
lock, which on PostgreSQL is an advisory lock every replica takes, and only when the
store holds exactly the events this process wrote: a turn or a keep-warm that another
replica sent meanwhile makes the cached session stale, so it is dropped and nothing is
sent. Before that, a lease in the store (`keep-warm:<session>`) lets one replica try at a
time: the others skip without queueing for the lock. Whoever holds the lease and the
lock and is current fires, once, and the event it writes makes every other replica
stand down. An eviction (LRU, idle, delete,
a command) stops the session's timer; a restarted gateway finds the sessions whose cache
may still be alive in the store and watches them again.

What a user is expected to do comes from the gaps between their messages, across all of
their sessions this process has served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict, deque
from collections.abc import Sequence

from stoker.agent.keepwarm import KeepWarm, SpendLimits
from stoker.agent.session import Session
from stoker.cache.keys import shared_digest
from stoker.cache.time_policy import LONGEST_TTL, WarmPlan
from stoker.clock import Clock, FrozenClock
from stoker.errors import SessionNotFound
from stoker.gateway.pool import AgentPool
from stoker.gateway.sink import read_head
from stoker.wire.record import CacheRecord

log = logging.getLogger(__name__)

GAPS_KEPT = 64  # per user: enough to estimate, bounded
LEASE_SECONDS = 120.0  # longer than one keep-warm call; a dead replica's lease lapses after it


class GatewayKeepWarm:
    """The gateway's keep-warm: timers, the cross-replica check, rescheduling, user gaps."""

    def __init__(
        self,
        pool: AgentPool,
        clock: Clock,
        limits: SpendLimits | None = None,
        *,
        holder: str = "",
    ) -> None:
        self.pool = pool
        self.holder = holder  # this replica, as its leases name it
        self.clock = clock
        self.scheduler = KeepWarm(clock, limits=limits, gaps=self._gaps_of, fire=self._fire)
        self._gaps: defaultdict[str, deque[float]] = defaultdict(lambda: deque(maxlen=GAPS_KEPT))
        self._last_turn: dict[str, float] = {}
        self._owner: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    # -- the gateway tells it what happens -------------------------------------------------

    def turn_starting(self, user: str, session_id: str) -> None:
        """A message arrives: the time since the user's last one is an observed gap."""
        last = self._last_turn.get(session_id)
        if last is not None:
            self._gaps[user].append(self.clock.now() - last)

    def turn_ended(self, user: str, session: Session) -> None:
        """Keep this session warm from now on (its plan starts from its last call)."""
        self._owner[session.id] = user
        if session.records:
            self._last_turn[session.id] = session.records[-1].started_at
        self.scheduler.watch(session)

    def forget(self, session_id: str) -> None:
        self.scheduler.forget(session_id)
        self._owner.pop(session_id, None)

    # -- sending ---------------------------------------------------------------------------

    def _gaps_of(self, session: Session) -> Sequence[float]:
        owner = self._owner.get(session.id)
        return tuple(self._gaps[owner]) if owner is not None else ()

    def plan_of(self, session: Session) -> WarmPlan | None:
        """What this scheduler would send for `session` before its entry expires (the
        cache clock shows it with its price); None when nothing is planned."""
        return session.warm_plan(gaps=self._gaps_of(session))

    async def _fire(self, session: Session, gaps: Sequence[float]) -> CacheRecord | None:
        sid, store = session.id, self.pool.store
        plan = session.warm_plan(gaps=gaps)
        if plan is None or not plan.sends:
            # A turn started since the timer was read (it may wait minutes on an
            # approval): do not queue behind its lock, its next call refreshes the entry.
            return None
        lease = f"keep-warm:{sid}"
        if plan.scope == "shared":  # one replica at a time keeps an agent's shared entry
            lease = f"keep-warm:fleet:{shared_digest(session.prefix)}"
        if not await store.take_lease(lease, self.holder, seconds=LEASE_SECONDS):
            return None  # another replica is sending this keep-warm
        try:
            return await self._fire_leased(session, gaps)
        finally:
            await store.drop_lease(lease, self.holder)

    async def _fire_leased(self, session: Session, gaps: Sequence[float]) -> CacheRecord | None:
        sid, store = session.id, self.pool.store
        async with store.session_lock(sid):
            entry = self.pool.agents.peek(sid)
            if entry is None or entry.session is not session:
                self.forget(sid)  # evicted or rebuilt since it was watched
                return None
            try:
                head = await read_head(store, sid)
            except SessionNotFound:
                self.pool.agents.evict(sid, "deleted")
                return None
            if head.events != entry.sink.written:
                # Another replica wrote (a turn, or this very keep-warm): stand down.
                self.pool.agents.evict(sid, "written by another process")
                return None
            return await session.warm(gaps=gaps)

    # -- lifecycle ---------------------------------------------------------------------------

    async def reschedule(self, *, limit: int) -> int:
        """Watch the stored sessions whose cache may still be alive (a restart): their
        agents are rebuilt from the store. Returns how many are watched.

        Only the gateway's own sessions (each has an owner): a CLI or library session in
        the same store belongs to another agent, which would not resume here."""
        since = time.time() - LONGEST_TTL  # the store stamps updates with the wall clock
        watched = 0
        listed = await self.pool.store.list_sessions(limit=limit, role="main", owned=True)
        for summary in listed:
            if summary.updated_at < since:
                break  # newest first: the rest are older still
            sid = summary.id
            try:
                owner = await self.pool.store.owner(sid)
                async with self.pool.store.session_lock(sid):
                    entry = await self.pool.acquire(
                        owner or "", sid, await read_head(self.pool.store, sid)
                    )
                    self.pool.agents.release(entry)
            except SessionNotFound:
                continue  # deleted since it was listed
            except Exception as exc:  # one unusable session must not stop the others
                log.warning("keep-warm could not reschedule session %s: %r", sid, exc)
                continue
            self.turn_ended(owner or "", entry.session)
            watched += 1
        return watched

    def start(self) -> None:
        """Run the timers in the background; `stop` ends them. A `FrozenClock` moves only
        when its holder moves it: there the timers fire as `pass_time` crosses them (or
        the holder drives `scheduler.idle`)."""
        if isinstance(self.clock, FrozenClock):
            self.clock.listen(self.scheduler)
        elif self._task is None:
            self._task = asyncio.create_task(self.scheduler.run(), name="stoker-keep-warm")

    async def stop(self) -> None:
        if isinstance(self.clock, FrozenClock):
            self.clock.unlisten(self.scheduler)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
