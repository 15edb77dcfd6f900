"""The seam for explicit cache objects: providers whose caches are resources a client
creates, extends and deletes (Gemini's `cachedContents`), billed for storage while they
exist.

A provider offers them by implementing `CacheObjects` (the Gemini adapter and the
simulator do). What to create, when to extend and when to delete is the time policy's
(`stoker.cache.storage`); the session makes the calls and records each
(`stoker.agent.explicit`). Every cache Stoker creates is named `stoker/<scope>/...`, so a
sweep at startup finds the ones a process left behind (it crashed, or was killed) and
deletes them; nothing else is touched.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from stoker.wire.request import Request

PREFIX = "stoker/"
"""The start of the display name of every cache Stoker creates."""


def label(scope: str, session_id: str) -> str:
    """The display name of a session's cache (the API takes at most 128 characters)."""
    return f"{PREFIX}{scope}/{session_id}"[:128]


def owned(display_name: str, scope: str) -> bool:
    """Whether a cache of this display name is one Stoker made in `scope`."""
    return display_name.startswith(f"{PREFIX}{scope}/")


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCall:
    """What one create, extend or delete did: the cache's name, size and expiry after it
    (a delete: when it would have expired), and when the call started."""

    name: str
    tokens: int
    expires_at: float
    started_at: float
    retries: int = 0


@runtime_checkable
class CacheObjects(Protocol):
    """A provider with explicit cache objects."""

    async def create_cache(self, request: Request, *, ttl: float, label: str) -> CacheCall:
        """Store `request`'s prefix and messages for `ttl` seconds."""
        ...

    async def extend_cache(self, name: str, *, ttl: float) -> CacheCall:
        """Keep the cache `ttl` seconds from now (longer or shorter than before)."""
        ...

    async def delete_cache(self, name: str) -> CacheCall:
        """Delete the cache now (its `tokens` and `expires_at` as they were)."""
        ...

    async def sweep_caches(self, scope: str, *, keep: Collection[str] = ()) -> list[str]:
        """Delete every cache Stoker made in `scope` but the ones named in `keep` and the
        ones this provider object made itself (a live process's); the names deleted."""
        ...


def cache_objects(provider: object) -> CacheObjects | None:
    """`provider` as a `CacheObjects` when it has explicit cache objects, else None."""
    return provider if isinstance(provider, CacheObjects) else None
