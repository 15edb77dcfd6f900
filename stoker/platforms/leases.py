"""Which replica handles an update: the one holding its lease in the store.

A lease is taken before an update is handled and renewed while it is, so replicas never
handle one twice; a process that dies holding one stops renewing it, and once it runs
out (`SECONDS`) another replica takes the update over. Waiting for a lease another
replica holds keeps the chat's later updates behind the one it is for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from stoker.store.base import SqlEventStore

SECONDS = 60.0  # renewed while an update is handled: a dead replica's expires soon


async def take(
    store: SqlEventStore,
    lease: str,
    holder: str,
    *,
    wanted: Callable[[], Awaitable[bool]],
    every: float,
) -> bool:
    """Wait until `holder` holds `lease` (True), looking every `every` seconds, unless
    the work stops being `wanted` first (False: answered elsewhere, nothing held)."""
    while not await store.take_lease(lease, holder, seconds=SECONDS):
        if not await wanted():
            return False
        await asyncio.sleep(every)
    if not await wanted():  # done meanwhile, by whoever held it before
        await store.drop_lease(lease, holder)
        return False
    return True


@asynccontextmanager
async def held(store: SqlEventStore, lease: str, holder: str) -> AsyncIterator[None]:
    """Inside, `lease` (taken) is renewed; on the way out, it is given back."""

    async def renew() -> None:
        while True:
            await asyncio.sleep(SECONDS / 3)
            await store.take_lease(lease, holder, seconds=SECONDS)

    renewing = asyncio.create_task(renew())
    try:
        yield
    finally:
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)
        await store.drop_lease(lease, holder)
