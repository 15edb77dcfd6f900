"""Regime L's machines: which one holds a request's cache, and when it overflows.

OpenAI routes an earlier model's request by a hash of its first tokens (tools included)
combined with `prompt_cache_key`, and keeps the entries on that machine. Above about 15
requests a minute for one prefix and key, requests overflow to other machines, which do
not hold the prefix (docs/provider-caching.md, "OpenAI routing and prompt_cache_key").

The simulator keeps a route's own machine under the plain entry keys, so traffic under
the rate behaves exactly as one store; an overflowed request reads and writes on another
machine, whose keys carry that machine's tag. Which machine is a hash of the route and
how many requests overflowed before: deterministic, and spread like a load balancer's.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass

WINDOW = 60.0  # the rate is counted over the trailing minute


@dataclass(frozen=True, slots=True)
class Routed:
    """Where one request went: `tag` "" is the route's own machine; `recent` counts the
    route's requests in the trailing minute, this one included."""

    tag: str
    recent: int

    @property
    def overflowed(self) -> bool:
        return self.tag != ""


class Routing:
    """Request times per route, and the machine each request lands on. Not thread-safe.

    A route's machine serves up to `per_minute` requests in any trailing minute; the rest
    overflow (so 20 a minute is 15 served and 5 overflowed, not 20 overflowed)."""

    __slots__ = ("_all", "_machines", "_next_purge", "_overflows", "_per_minute", "_served")

    def __init__(self, *, machines: int, per_minute: float | None) -> None:
        self._machines = machines
        self._per_minute = per_minute
        self._all: dict[str, deque[float]] = {}  # every request on the route
        self._served: dict[str, deque[float]] = {}  # those its own machine served
        self._overflows: dict[str, int] = {}
        self._next_purge = float("-inf")

    def route(self, route: str, at: float) -> Routed:
        """Count a request on `route` starting at `at` and say which machine serves it."""
        self._purge(at)
        every = _trimmed(self._all.setdefault(route, deque()), at)
        served = _trimmed(self._served.setdefault(route, deque()), at)
        every.append(at)
        limit = self._per_minute
        if limit is None or self._machines < 2 or len(served) < limit:
            served.append(at)
            return Routed(tag="", recent=len(every))
        n = self._overflows[route] = self._overflows.get(route, 0) + 1
        digest = hashlib.sha256(f"{route}/{n}".encode()).digest()
        machine = 1 + int.from_bytes(digest[:8], "big") % (self._machines - 1)
        return Routed(tag=f"m{machine}|", recent=len(every))

    def _purge(self, at: float) -> None:
        """Forget routes idle for a whole window (memory only: their rate is zero)."""
        if at < self._next_purge:
            return
        self._next_purge = at + WINDOW
        for route in [r for r, t in self._all.items() if not t or t[-1] <= at - WINDOW]:
            del self._all[route]
            self._served.pop(route, None)
            self._overflows.pop(route, None)


def _trimmed(times: deque[float], at: float) -> deque[float]:
    while times and times[0] <= at - WINDOW:
        times.popleft()
    return times
