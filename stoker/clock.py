"""Time as a seam: the simulator and the system prompt's date read a `Clock`, tests freeze it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()


@dataclass(slots=True)
class FrozenClock:
    """A clock that moves only when told to: `advance(minutes=6)` jumps past a 5-minute TTL."""

    at: float = 1_790_000_000.0  # 2026-09-21, a fixed day so dates in prompts are stable

    def now(self) -> float:
        return self.at

    def advance(self, seconds: float = 0.0, *, minutes: float = 0.0) -> None:
        self.at += seconds + 60.0 * minutes
