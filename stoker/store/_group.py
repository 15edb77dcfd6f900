"""Group commit, for both backends: writes that arrive while one is being committed wait
in a queue, and the next commit takes all of them.

`commit(batch)` writes a batch of writes (each a list of statements, one transaction's
worth) and returns each one's error (None: written); it raises when the batch as a whole
failed, which fails every write in it. Each caller returns only once its own write is
committed, so what is acknowledged is durable; a caller that is cancelled while it waits
does not cancel the commit (a write the database may already be committing is finished,
not abandoned).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from stoker.store._sql import Op

Batch = Sequence[Sequence[Op]]
Commit = Callable[[Batch], Awaitable[Sequence[BaseException | None]]]


class GroupCommit:
    """A queue of writes and the one task that commits them, a batch at a time."""

    def __init__(self, commit: Commit) -> None:
        self._commit = commit
        self._queue: list[tuple[Sequence[Op], asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def write(self, ops: Sequence[Op]) -> None:
        """Returns once `ops` are committed (with whatever else was waiting), or raises
        the error of this write alone."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((ops, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        await asyncio.shield(done)

    async def drain(self) -> None:
        """Until what is queued now is committed (a store closing)."""
        if self._writer is not None:
            await self._writer

    async def _write_queued(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                errors = await self._commit([ops for ops, _ in batch])
            except Exception as exc:  # the batch as a whole failed: every write in it
                errors = [exc] * len(batch)
            except BaseException:  # cancelled (the loop is closing): nobody is told it was
                for _, done in batch:
                    done.cancel()
                raise
            for (_, done), error in zip(batch, errors, strict=True):
                if done.done():
                    continue
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)
