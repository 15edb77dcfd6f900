"""The keep-warm scheduler: sends each watched session's ping or seal when it is due.

Sessions decide (`Session.warm_plan`); this only keeps the time. It reads the sessions'
`Clock`: with the system clock `run()` sleeps until the next due time; with a
`FrozenClock`, `idle(seconds)` moves the clock through every due time in order and
fires each one there, so a test or a benchmark crosses a three-hour gap in
milliseconds and sees exactly the requests a real one would send.

Money caps that span sessions live here too: `hourly_usd` over any rolling hour and
`total_usd` over the scheduler's life. A keep-warm that would pass a cap is not sent.

A session whose turn is running is not idle: it has no plan (`Session.warm_plan`), so
nothing fires while a turn waits, for instance on a person approving a tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass

from stoker.agent.session import Session
from stoker.clock import Clock, FrozenClock
from stoker.errors import ConfigError
from stoker.wire.record import CacheRecord

log = logging.getLogger(__name__)

RECHECK_SECONDS = 30.0
"""How often `run` looks again at watched sessions that have no plan now (a turn runs)."""

GapSource = Callable[[Session], Sequence[float]]
Fire = Callable[[Session, Sequence[float]], Awaitable[CacheRecord | None]]
"""How a due keep-warm is sent: `session.warm(gaps=...)`, or the caller's own way (the
gateway takes the session's lock across replicas and checks the store first)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendLimits:
    """Keep-warm spend caps across every session of a scheduler (None: no cap)."""

    hourly_usd: float | None = None
    total_usd: float | None = None


class KeepWarm:
    """Watches sessions and sends their keep-warm requests on time."""

    def __init__(
        self,
        clock: Clock,
        *,
        limits: SpendLimits | None = None,
        gaps: GapSource | None = None,
        fire: Fire | None = None,
        weak: bool = False,
    ) -> None:
        """`weak`: hold the sessions weakly, so a session its program dropped is forgotten
        (an agent's own keep-warm; the gateway forgets its sessions itself)."""
        self.clock = clock
        self.limits = limits or SpendLimits()
        self._gaps = gaps
        self._fire = fire
        self._sessions: MutableMapping[str, Session] = weakref.WeakValueDictionary() if weak else {}
        self._target: float | None = None  # the due time `run` sleeps until
        self._spent: deque[tuple[float, float]] = deque()  # (when, usd)
        self._total = 0.0
        self._changed = asyncio.Event()

    # -- which sessions ------------------------------------------------------------------

    def watch(self, session: Session) -> None:
        """Keep `session` warm from now on, whatever its turns do to its plan."""
        self._sessions[session.id] = session
        plan = session.warm_plan(gaps=self._gaps_of(session))
        if plan is not None and plan.sends and (self._target is None or plan.at < self._target):
            self._changed.set()  # sooner than `run` sleeps for: wake it

    def forget(self, session_id: str) -> None:
        """Stop keeping a session warm (deleted, evicted, closed)."""
        self._sessions.pop(session_id, None)

    def forget_all(self) -> None:
        self._sessions.clear()

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    # -- when ------------------------------------------------------------------------------

    def due_times(self) -> dict[str, float]:
        """When each watched session's next keep-warm is due (sessions with none left out).
        Asked of each session's plan every time: a turn or a rebase changes it, and this
        is read when a timer fires, not on every turn."""
        due = {}
        for sid, session in list(self._sessions.items()):
            plan = session.warm_plan(gaps=self._gaps_of(session))
            if plan is not None and plan.sends:
                due[sid] = plan.at
        return due

    def next_due(self) -> float | None:
        return min(self.due_times().values(), default=None)

    async def fire_due(self) -> list[CacheRecord]:
        """Send every keep-warm due now; their records (failures are logged, not raised)."""
        now = self.clock.now()
        records = []
        for sid, at in sorted(self.due_times().items(), key=lambda item: item[1]):
            session = self._sessions.get(sid)
            if at > now:
                break
            if session is None or not self._within_limits(now):
                continue
            gaps = self._gaps_of(session)
            record = await (
                self._fire(session, gaps) if self._fire is not None else session.warm(gaps=gaps)
            )
            if record is not None:
                records.append(record)
                self._count(now, record.cost_usd or 0.0)
        return records

    # -- driving the clock ---------------------------------------------------------------------

    async def idle(self, seconds: float) -> list[CacheRecord]:
        """Let `seconds` pass on a `FrozenClock`, firing each keep-warm at its due time."""
        if not isinstance(self.clock, FrozenClock):
            raise ConfigError("KeepWarm.idle needs a FrozenClock; use run() with a real clock")
        end = self.clock.at + seconds
        records: list[CacheRecord] = []
        while (due := self.next_due()) is not None and due <= end:
            self.clock.at = max(self.clock.at, due)
            records += await self.fire_due()
            if self.next_due() == due:
                break  # due but held back (a cap): nothing more will fire in this gap
        self.clock.at = end
        return records

    async def run(self) -> None:
        """Fire keep-warm requests as they fall due, until cancelled (a real clock)."""
        while True:
            self._changed.clear()
            due = self._target = self.next_due()
            wait = None if due is None else max(0.0, due - self.clock.now())
            if wait is None and self._sessions:
                # A running turn has no plan (it may be waiting for an approval): look
                # again later even if nobody calls `watch` when it ends.
                wait = RECHECK_SECONDS
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
                continue
            try:
                fired = await self.fire_due()
            except Exception as exc:  # never let one session stop the others' keep-warm
                log.warning("keep-warm round failed: %r", exc)
                fired = []
            if not fired:
                await asyncio.sleep(1.0)  # due but held back (a cap): look again shortly

    # -- money ---------------------------------------------------------------------------------

    def _within_limits(self, now: float) -> bool:
        while self._spent and self._spent[0][0] <= now - 3600.0:
            self._spent.popleft()
        hourly, total = self.limits.hourly_usd, self.limits.total_usd
        if hourly is not None and sum(usd for _, usd in self._spent) >= hourly:
            return False
        return total is None or self._total < total

    def _count(self, now: float, usd: float) -> None:
        self._spent.append((now, usd))
        self._total += usd

    def _gaps_of(self, session: Session) -> Sequence[float]:
        return self._gaps(session) if self._gaps is not None else ()
