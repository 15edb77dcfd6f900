"""How much a message costs the gateway itself, apart from the provider.

Two figures per request, sent in `Server-Timing`:

* `gateway`: the handler's wall time minus the wall time of its provider calls. Under
  load it includes waiting for the event loop and the store behind other sessions.
* `cpu`: the time the handler's own coroutine steps ran on the event loop, minus the
  provider calls' steps: the work the gateway adds to a message (routing, auth, the
  lock, the agent cache, the turn's planning and records, serialization), without
  queueing. Store writes running on the store's thread are not in it.

Steps are timed by awaiting the handler's coroutine through `_Stepped`, which times
each `send` into it; tasks the handler starts are not counted (a streamed turn's task is
timed by its provider calls only).
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class Tally:
    """Seconds: the handler's steps, and the provider calls' wall time and steps."""

    handler_steps: float = 0.0
    provider_wall: float = 0.0
    provider_steps: float = 0.0


_current: ContextVar[Tally | None] = ContextVar("stoker_gateway_tally", default=None)


class _Stepped:
    """Awaits `coro`, adding the time each of its steps runs to one field of a tally."""

    __slots__ = ("_coro", "_field", "_tally")

    def __init__(self, coro: Coroutine[Any, Any, Any], tally: Tally, field: str) -> None:
        self._coro, self._tally, self._field = coro, tally, field

    def _add(self, seconds: float) -> None:
        setattr(self._tally, self._field, getattr(self._tally, self._field) + seconds)

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._coro.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter()
            try:
                yielded = inner.throw(error) if error is not None else inner.send(value)
            except StopIteration as stop:
                self._add(time.perf_counter() - start)
                return stop.value
            except BaseException:
                self._add(time.perf_counter() - start)
                raise
            self._add(time.perf_counter() - start)
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go into the coroutine
                value, error = None, exc


async def provider_call(coro: Coroutine[Any, Any, T]) -> T:
    """Await a provider call, adding its wall time and its steps to the current tally."""
    tally = _current.get()
    if tally is None:
        return await coro
    start = time.perf_counter()
    try:
        result: T = await _Stepped(coro, tally, "provider_steps")
        return result
    finally:
        tally.provider_wall += time.perf_counter() - start


@contextmanager
def _tallying() -> Iterator[Tally]:
    tally = Tally()
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


async def timed(coro: Coroutine[Any, Any, T]) -> tuple[T, dict[str, str]]:
    """Await a handler's work; returns its result and a `Server-Timing` header (ms)."""
    with _tallying() as tally:
        start = time.perf_counter()
        result: T = await _Stepped(coro, tally, "handler_steps")
        wall = time.perf_counter() - start
    own_wall = wall - tally.provider_wall
    own_cpu = tally.handler_steps - tally.provider_steps
    header = (
        f"gateway;dur={own_wall * 1000:.3f}, cpu;dur={own_cpu * 1000:.3f}, "
        f"provider;dur={tally.provider_wall * 1000:.3f}"
    )
    return result, {"Server-Timing": header}
