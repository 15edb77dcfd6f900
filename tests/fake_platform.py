"""What every fake chat-platform API keeps: the calls the bot made, to read back and wait on."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar


class RecordedCalls:
    """A fake's call log (`calls`, guarded by `_lock`: the fake serves in another thread).
    `SEND` is the platform's method for posting a message."""

    SEND: ClassVar[str]
    calls: list[tuple[str, dict[str, Any]]]
    _lock: threading.Lock

    def sent(self, method: str | None = None) -> list[dict[str, Any]]:
        """The parameters of each call of `method` (default: posting a message), in order."""
        wanted = method or self.SEND
        with self._lock:
            return [params for name, params in self.calls if name == wanted]

    def texts(self) -> list[str]:
        return [str(p["text"]) for p in self.sent()]

    async def wait_for(self, check: Callable[[], bool], within: float = 10.0) -> None:
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; the bot called: {self.calls}")
            await asyncio.sleep(0.01)
