"""The thread an in-process client records on (`stoker.proxy.in_process`).

Every client has one: a daemon thread running an event loop of its own, where its calls
are recorded and its idle conversations kept warm, whatever thread or loop sends the
calls. It stops when the client closes and is drained when the interpreter exits: at
`threading`'s exit hook, which runs before the thread pools stop taking work (the store
writes through one), so a script that never closed its client still stores every call
that finished.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from stoker.wire.exchange import Exchange

log = logging.getLogger(__name__)


class ClientCore(Protocol):
    """What the thread asks of the client's core (`stoker.proxy.in_process.InProcess`)."""

    @property
    def process(self) -> object | None: ...

    @property
    def last_call(self) -> Exchange | None: ...

    def wait_recorded(self, timeout: float = 10.0) -> bool: ...

    def run_on_loop(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any: ...

    async def latest(self) -> Exchange | None: ...

    async def close_all(self) -> None: ...


class Engine:
    """A client's event loop, on a daemon thread: recording and keep-warm run there.

    Closed with the client, or at the latest when the process exits (threading's exit
    hook), so every call that finished is stored before the interpreter goes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.core: ClientCore | None = None
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="stoker-http-client", daemon=True
        )
        self._thread.start()
        self._closed = False
        _at_exit(functools.partial(_close_at_exit, weakref.ref(self)))

    def latest(self, timeout: float = 30.0) -> Exchange | None:
        """Once every call so far is recorded (from any thread but the engine's), the
        latest one."""
        assert self.core is not None
        self.core.wait_recorded(timeout)
        if self.core.process is None:
            return self.core.last_call
        latest: Exchange | None = self.core.run_on_loop(self.core.latest(), timeout)
        return latest

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        self._closed = True
        if self.core is not None:
            done = asyncio.run_coroutine_threadsafe(self.core.close_all(), self.loop)
            try:
                done.result(timeout)
            except Exception as exc:  # closing must not raise into the user's code
                log.warning("the Stoker client could not store every call before closing: %r", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


def _at_exit(callback: Callable[[], None]) -> None:
    """Run `callback` as the interpreter exits, before the thread pools stop taking work
    (the store writes through one): `threading`'s own exit hook, which runs ahead of
    `atexit` and is how `concurrent.futures` registers its shutdown; `atexit` where an
    interpreter has no such hook."""
    hook = getattr(threading, "_register_atexit", None)
    if hook is None:
        atexit.register(callback)
        return
    try:
        hook(callback)
    except RuntimeError:  # already shutting down: nothing can be stored any more
        atexit.register(callback)


def _close_at_exit(ref: weakref.ReferenceType[Engine]) -> None:
    engine = ref()
    if engine is not None:
        engine.close()
