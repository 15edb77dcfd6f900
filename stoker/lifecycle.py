"""How Stoker's long-lived objects end: closed by `async with`, and the tasks they leave
running given a grace and then cancelled. Layer 0, so a provider, an agent, the gateway
and a platform bridge all end the same way."""

from __future__ import annotations

import asyncio
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

T = TypeVar("T")


class AsyncClosing(metaclass=ABCMeta):
    """`async with thing:` closes it with `aclose` when the block ends, however it ends."""

    __slots__ = ()

    @abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class Background:
    """Tasks that must run to their end though whoever started them has gone (a reply whose
    stream closed, a platform update): held so they are not collected mid-run, and each
    failure handed to `failed`, since no one awaits them to see it."""

    def __init__(self, failed: Callable[[BaseException], None]) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failed = failed

    def __bool__(self) -> bool:
        return bool(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._failed(exc)

    async def idle(self) -> None:
        """Wait until every task is done, those they spawn included."""
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)

    async def stop(self, grace: float | None) -> int:
        """Give the tasks `grace` seconds (None: as long as they take), then cancel the rest
        and wait until they have settled; how many were cancelled."""
        if not self._tasks:
            return 0
        _, running = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        return len(running)
