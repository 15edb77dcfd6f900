"""Time as a seam: the simulator and the system prompt's date read a `Clock`, tests freeze it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()


class Timer(Protocol):
    """Something that acts at times of its choosing (a keep-warm scheduler): what a
    `FrozenClock` steps through when time passes."""

    def next_due(self) -> float | None: ...

    async def fire_due(self) -> list[Any]: ...


@dataclass(slots=True)
class FrozenClock:
    """A clock that moves only when told to: `advance(minutes=6)` jumps past a 5-minute TTL.

    `await pass_time(minutes=6)` moves it the same way but stops at every time a listening
    `Timer` is due (an agent's background keep-warm listens to its frozen clock) and lets
    it act there: a test or benchmark crosses an hour in milliseconds and sees exactly
    the requests a real hour would send."""

    at: float = 1_790_000_000.0  # 2026-09-21, a fixed day so dates in prompts are stable
    timers: list[Timer] = field(default_factory=list, repr=False, compare=False)

    def now(self) -> float:
        return self.at

    def advance(self, seconds: float = 0.0, *, minutes: float = 0.0) -> None:
        self.at += seconds + 60.0 * minutes

    def listen(self, timer: Timer) -> None:
        if timer not in self.timers:
            self.timers.append(timer)

    def unlisten(self, timer: Timer) -> None:
        if timer in self.timers:
            self.timers.remove(timer)

    async def pass_time(self, seconds: float = 0.0, *, minutes: float = 0.0) -> list[Any]:
        """Move the clock, stopping at each listening timer's due time to let it fire;
        what they fired, in order."""
        end = self.at + seconds + 60.0 * minutes
        fired: list[Any] = []
        held: list[Timer] = []  # due but held back (a spending cap): not again in this gap
        while True:
            due = [(t.next_due(), t) for t in list(self.timers) if t not in held]
            waiting = [(at, t) for at, t in due if at is not None and at <= end]
            if not waiting:
                break
            at, timer = min(waiting, key=lambda pair: pair[0])
            self.at = max(self.at, at)
            got = await timer.fire_due()
            fired += got
            if not got and timer.next_due() == at:
                held.append(timer)
        self.at = end
        return fired
