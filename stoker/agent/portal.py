"""Synchronous calls into async code: one event loop in a thread of its own, per agent.

`session.send_sync` and `agent.run_sync` run their coroutine there and wait for it. One
loop for every call of an agent, because the provider's connections (an SDK's HTTP
client) belong to the loop that opened them: a new loop per call (`asyncio.run`) would
strand them. The thread starts at the first synchronous call and stops when the agent
is closed. Called from inside a running event loop, a synchronous call would block that
loop: it is refused with an error that says to `await` instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from stoker.errors import ConfigError

T = TypeVar("T")


class Portal:
    """An event loop running in a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def call(self, coroutine: Coroutine[Any, Any, T], *, what: str) -> T:
        """Run `coroutine` on the portal's loop and return its result (its exception)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coroutine.close()
            raise ConfigError(
                f"{what} cannot run inside a running event loop (it would block it): "
                "await the async form instead (`await session.send(...)`)"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self._started()).result()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The portal's loop, once started."""
        return self._loop

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="stoker-portal", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self, finish: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run `finish` (closing what lives on the loop), then stop the loop and its thread."""
        with self._guard:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            if finish is not None:
                finish.close()
            return
        if finish is not None:
            asyncio.run_coroutine_threadsafe(finish, loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
