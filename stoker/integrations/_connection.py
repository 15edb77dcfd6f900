"""One live client connection, held open by a task of its own.

The `mcp` SDK's clients are async context managers built on anyio task groups, which
must be entered and left by the same task. A toolkit is used from many tasks (turns,
cache fetches), so each connection gets an owner task that enters the client, hands
it out, and leaves when told to. Requests from other tasks are fine: they only use
the client's streams.

Giving up on a connection (timeout, broken pipe) never waits for its teardown: the
SDK's shutdown of a stuck stdio server takes seconds (close stdin, grace period,
SIGTERM), and the turn that gave up must not pay them. The owner task winds down in
the background; `McpToolkit.close` awaits it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

logger = logging.getLogger(__name__)

C = TypeVar("C")


class Connection(Generic[C]):
    """A client of type `C`, opened by `opener` as soon as this is made, and held open
    until `abort` (which is also how a healthy connection is closed)."""

    __slots__ = ("_label", "_ready", "_stop", "_task")

    def __init__(self, label: str, opener: Callable[[], AbstractAsyncContextManager[C]]) -> None:
        loop = asyncio.get_running_loop()
        self._label = label
        self._ready: asyncio.Future[C] = loop.create_future()
        self._ready.add_done_callback(_retrieve)
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own(opener), name=f"stoker-connection-{label}")

    @property
    def usable(self) -> bool:
        """Connected or still connecting, and not given up on."""
        return not self._stop.is_set() and not self._task.done()

    @property
    def task(self) -> asyncio.Task[None]:
        """The owner task: done once the connection is fully torn down."""
        return self._task

    async def client(self) -> C:
        """The connected client; waits for the connection, raises what opening raised.

        Cancelling a waiter does not cancel the connection: others may be waiting too.
        """
        return await asyncio.shield(self._ready)

    def abort(self, error: BaseException) -> None:
        """Give up on the connection: waiters get `error`, and teardown starts in the
        background (a client still opening is cancelled)."""
        if not self._ready.done():
            self._ready.set_exception(error)
            self._task.cancel()
        self._stop.set()

    async def _own(self, opener: Callable[[], AbstractAsyncContextManager[C]]) -> None:
        try:
            async with opener() as client:
                if self._ready.done():  # aborted while opening, and the cancel came late
                    return
                self._ready.set_result(client)
                await self._stop.wait()
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.set_exception(ConnectionAbortedError("connection abandoned"))
            raise
        except Exception as exc:
            if self._ready.done():
                logger.warning("connection %s ended with an error: %r", self._label, exc)
            else:
                self._ready.set_exception(exc)
        finally:
            self._stop.set()


def _retrieve(future: asyncio.Future[Any]) -> None:
    # Nobody may be waiting when an aborted connection fails; the error is reported
    # to whoever gave up on it, so it must not be logged again as "never retrieved".
    if not future.cancelled():
        future.exception()
