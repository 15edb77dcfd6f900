"""An agent's own keep-warm: while the agent is open, its sessions' caches are kept warm
by the time policy in the background, as `stoker serve` and `stoker chat` keep theirs.

On a real clock a `KeepWarm` runs as a task on the loop that made the sessions; on a
`FrozenClock` it listens to the clock instead, so `await clock.pass_time(minutes=6)` fires
each keep-warm at its due time. A session made outside a running event loop (a
synchronous call) gets no timer. Closing the agent stops it; sessions are held weakly, so
a session the program dropped is dropped here too.
"""

from __future__ import annotations

import asyncio
import contextlib

from stoker.agent.keepwarm import KeepWarm, SpendLimits
from stoker.agent.session import Session
from stoker.clock import Clock, FrozenClock


class BackgroundWarmth:
    """The keep-warm of one agent's sessions."""

    def __init__(self, clock: Clock, limits: SpendLimits) -> None:
        self.clock = clock
        self.keep_warm = KeepWarm(clock, limits=limits, weak=True)
        self._task: asyncio.Task[None] | None = None

    def watch(self, session: Session) -> bool:
        """Keep `session` warm from now on; False when no event loop runs (nothing to run
        the timer on)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self.keep_warm.watch(session)
        if isinstance(self.clock, FrozenClock):
            self.clock.listen(self.keep_warm)
        elif self._task is None or self._task.done():
            self._task = loop.create_task(self.keep_warm.run(), name="stoker-keep-warm")
        return True

    async def aclose(self) -> None:
        """Stop every timer."""
        self.keep_warm.forget_all()
        if isinstance(self.clock, FrozenClock):
            self.clock.unlisten(self.keep_warm)
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
