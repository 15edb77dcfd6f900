"""A `Request` is the input of every dialect: the frozen prefix, the history, cache directives.

It is provider-neutral; `stoker.wire.dialects` turns it into each provider's payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix

Ttl = Literal["5m", "1h"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Breakpoint:
    """Where a cache breakpoint goes: the end of tools+system (`message is None`) or a block."""

    message: int | None = None
    block: int = -1
    ttl: Ttl = "5m"


def furthest_long(breakpoints: tuple[Breakpoint, ...]) -> tuple[int, int] | None:
    """Where the furthest 1-hour marker on the history is (message, block), if any: the
    entry a session holds after a call (`CacheState.after_refresh`, the store's
    `record_ops`)."""
    long = [(b.message, b.block) for b in breakpoints if b.ttl == "1h" and b.message is not None]
    return max(long, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheObject:
    """An explicit cache object a request reads its start from (Gemini's `cachedContents`):
    it holds the prefix (tools, system, tool choice) and the first `messages` messages of
    the history, so a request naming it sends only the messages after those."""

    name: str
    messages: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """Everything a provider call sends. `cache_key` is OpenAI's `prompt_cache_key`;
    `cache_object` an explicit cache the request starts from (see `CacheObject`).

    `render_memo` is a lineage's scratch space for incremental rendering (see
    `stoker.wire.dialects._memo`); it never changes what is rendered.
    """

    prefix: Prefix
    messages: tuple[Message, ...]
    max_tokens: int = 4096
    breakpoints: tuple[Breakpoint, ...] = ()
    cache_key: str | None = None
    cache_retention: str | None = None
    stream: bool = False
    cache_object: CacheObject | None = None
    render_memo: dict[str, Any] | None = field(default=None, compare=False, repr=False)
