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
    """Request times per route, and the machine each request lands on. Not thread-safe."""

    __slots__ = ("_machines", "_next_purge", "_overflows", "_per_minute", "_recent")

    def __init__(self, *, machines: int, per_minute: float | None) -> None:
        self._machines = machines
        self._per_minute = per_minute
        self._recent: dict[str, deque[float]] = {}
        self._overflows: dict[str, int] = {}
        self._next_purge = float("-inf")

    def route(self, route: str, at: float) -> Routed:
        """Count a request on `route` starting at `at` and say which machine serves it."""
        self._purge(at)
        times = self._recent.setdefault(route, deque())
        while times and times[0] <= at - WINDOW:
            times.popleft()
        times.append(at)
        recent = len(times)
        if self._per_minute is None or self._machines < 2 or recent <= self._per_minute:
            return Routed(tag="", recent=recent)
        n = self._overflows[route] = self._overflows.get(route, 0) + 1
        digest = hashlib.sha256(f"{route}/{n}".encode()).digest()
        machine = 1 + int.from_bytes(digest[:8], "big") % (self._machines - 1)
        return Routed(tag=f"m{machine}|", recent=recent)

    def _purge(self, at: float) -> None:
        """Forget routes idle for a whole window (memory only: their rate is zero)."""
        if at < self._next_purge:
            return
        self._next_purge = at + WINDOW
        for route in [r for r, t in self._recent.items() if not t or t[-1] <= at - WINDOW]:
            del self._recent[route]
            self._overflows.pop(route, None)
