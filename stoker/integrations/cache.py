"""A shared, TTL-bound cache of each toolkit's tool list.

Listing an MCP server's tools costs a process start or a network round trip; paying
it when a session is built would slow every first turn. One `ToolkitCache` is made by
the application and handed to every registry and session (there is no module-level
instance: tests and apps each own theirs). Sessions read it with `peek`, which never
fetches and never waits, so building a session stays instant; `get` fetches what is
missing, and concurrent callers for one toolkit share a single fetch.

Entries are keyed by toolkit name: two registries that name a toolkit alike share
its entry, which is the point of a process-wide cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from stoker.clock import Clock, SystemClock
from stoker.errors import ConfigError
from stoker.integrations.errors import IntegrationError, ToolkitUnavailable
from stoker.integrations.toolkit import (
    IntegrationContext,
    Toolkit,
    ToolSpec,
    sorted_specs,
    specs_bytes,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """A toolkit's tool list as fetched at `fetched_at`, sorted by name.

    `digest` is the sha256 of the list's canonical bytes: equal digests mean the
    model would be told exactly the same thing.
    """

    toolkit: str
    tools: tuple[ToolSpec, ...]
    fetched_at: float
    expires_at: float
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        tools = sorted_specs(self.toolkit, self.tools)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "digest", hashlib.sha256(specs_bytes(tools)).hexdigest())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.tools)

    def fresh(self, now: float) -> bool:
        return now < self.expires_at


@dataclass(frozen=True, slots=True)
class _Failure:
    error: IntegrationError
    until: float


class ToolkitCache:
    """Tool lists by toolkit name, each fresh for `ttl` seconds of `clock` time.

    A failed fetch is remembered for `failure_ttl` seconds: `get` re-raises it
    without contacting the toolkit again, so a dead server costs one timeout per
    `failure_ttl`, not one per turn of every session. `fetch_count` counts the
    fetches started per toolkit (failed ones included).

    Not thread-safe: use it from one event loop, like the registries it serves.
    """

    __slots__ = (
        "_clock",
        "_counts",
        "_epochs",
        "_failures",
        "_inflight",
        "_snapshots",
        "failure_ttl",
        "ttl",
    )

    def __init__(
        self, *, ttl: float = 300.0, failure_ttl: float = 30.0, clock: Clock | None = None
    ) -> None:
        if ttl < 0 or failure_ttl < 0:
            raise ConfigError(f"cache TTLs must be >= 0 seconds, got {ttl=} {failure_ttl=}")
        self.ttl = ttl
        self.failure_ttl = failure_ttl
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._snapshots: dict[str, Snapshot] = {}
        self._failures: dict[str, _Failure] = {}
        self._inflight: dict[str, asyncio.Task[Snapshot]] = {}
        self._epochs: dict[str, int] = {}
        self._counts: dict[str, int] = {}

    def peek(self, name: str) -> Snapshot | None:
        """The toolkit's snapshot if it is fresh, else None. Never fetches, never waits.

        A stale snapshot is not returned: a session marked authoritative from it could
        announce the tools of a server that has since gone.
        """
        snapshot = self._snapshots.get(name)
        if snapshot is None or not snapshot.fresh(self._clock.now()):
            return None
        return snapshot

    async def get(self, toolkit: Toolkit, context: IntegrationContext) -> Snapshot:
        """A fresh snapshot of `toolkit`, fetching it when missing or expired.

        Concurrent callers share one fetch (made with the first caller's context); a
        caller that is cancelled does not cancel the fetch for the others. Raises an
        `IntegrationError` when the toolkit cannot list its tools.
        """
        name = toolkit.name
        snapshot = self.peek(name)
        if snapshot is not None:
            return snapshot
        failure = self._failures.get(name)
        if failure is not None and self._clock.now() < failure.until:
            raise failure.error.with_traceback(None)
        task = self._inflight.get(name)
        if task is None:
            self._counts[name] = self._counts.get(name, 0) + 1
            task = asyncio.create_task(
                self._fetch(toolkit, context, self._epochs.get(name, 0)),
                name=f"stoker-toolkit-fetch-{name}",
            )
            self._inflight[name] = task
            task.add_done_callback(_Settled(self._inflight, name))
        return await asyncio.shield(task)

    def invalidate(self, name: str) -> None:
        """Forget the toolkit's snapshot and remembered failure; a fetch already under
        way still answers its callers but is not stored."""
        self._snapshots.pop(name, None)
        self._failures.pop(name, None)
        self._inflight.pop(name, None)
        self._epochs[name] = self._epochs.get(name, 0) + 1

    def fetch_count(self, name: str) -> int:
        """How many fetches of the toolkit this cache has started."""
        return self._counts.get(name, 0)

    @property
    def fetch_counts(self) -> Mapping[str, int]:
        """Fetches started per toolkit name (a read-only copy)."""
        return MappingProxyType(dict(self._counts))

    async def _fetch(self, toolkit: Toolkit, context: IntegrationContext, epoch: int) -> Snapshot:
        name = toolkit.name
        try:
            listed = await toolkit.list_tools(context)
            tools = sorted_specs(name, listed)
        except IntegrationError as exc:
            self._remember(name, epoch, exc)
            raise
        except Exception as exc:
            error = ToolkitUnavailable(name, "list tools", f"{type(exc).__name__}: {exc}")
            self._remember(name, epoch, error)
            raise error from exc
        now = self._clock.now()
        snapshot = Snapshot(toolkit=name, tools=tools, fetched_at=now, expires_at=now + self.ttl)
        if self._epochs.get(name, 0) == epoch:
            self._snapshots[name] = snapshot
            self._failures.pop(name, None)
        return snapshot

    def _remember(self, name: str, epoch: int, error: IntegrationError) -> None:
        logger.warning("listing the tools of toolkit %r failed: %s", name, error)
        if self._epochs.get(name, 0) == epoch and self.failure_ttl > 0:
            self._failures[name] = _Failure(error=error, until=self._clock.now() + self.failure_ttl)


@dataclass(frozen=True, slots=True)
class _Settled:
    """Done-callback of a fetch: drop it from the in-flight map and mark its error as
    retrieved (its callers may all have been cancelled; the error is logged already)."""

    inflight: dict[str, asyncio.Task[Snapshot]]
    name: str

    def __call__(self, task: asyncio.Task[Snapshot]) -> None:
        if self.inflight.get(self.name) is task:
            del self.inflight[self.name]
        if not task.cancelled():
            task.exception()
