"""Bounded memos for work that depends only on a payload's content, found again cheaply.

The simulator and the accountants see the same history again on every call, one turn
longer. A unit (a block, an item, a message) is worth parsing, counting and hashing once:
its result is kept under a prefix-chain key, `link(previous, canonical bytes)`, which
depends only on everything up to and including the unit, so a payload received over HTTP
(fresh objects every time) finds the work of the previous call by content alone.

Serializing an old unit to find its key is itself the cost to avoid, so a caller that
knows its payload is never mutated (the dialects render from frozen values and never
change a rendered dict) may also look a unit up by identity: the memo keeps the object
itself, so its `id` cannot be reused while the entry lives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic_core import PydanticSerializationError, to_json

T = TypeVar("T")

DEFAULT_CAPACITY = 100_000
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once


def compact(value: Any) -> str:
    """JSON as a server re-serializes a parsed body: no transport whitespace, key order kept.

    Key order is never sorted: Anthropic documents that a reordered `tool_use` input
    breaks the cache, so order is part of the content.
    """
    return _COMPACT.encode(value)


def content_key(value: Any) -> bytes | str:
    """A key equal for equal JSON content and only for it, for memos (never sent, never
    counted): pydantic-core's serializer, four times faster than `compact`; `compact`'s
    text for what it cannot encode (a lone surrogate)."""
    try:
        return to_json(value)
    except PydanticSerializationError:
        return compact(value)


def link(previous: str, *parts: str) -> str:
    """The key of `previous` extended by `parts` (length-prefixed, so no two splits collide)."""
    h = hashlib.sha256(previous.encode("utf-8", "surrogatepass"))
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


class ChainMemo:
    """A bounded map, least recently used dropped first, approximately.

    Two generations: hits are served from either and promoted to the young one; when the
    young one is full it becomes the old one and the previous old one is dropped. A hit
    costs one or two dict lookups (an exact LRU would reorder on every hit), and at most
    `capacity` entries are held, so a long-running `stoker sim serve` stays bounded.
    """

    __slots__ = ("_half", "_old", "_young")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._half = max(1, capacity // 2)
        self._young: dict[Any, Any] = {}
        self._old: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        """The value kept under `key`, or None."""
        value = self._young.get(key)
        if value is None:
            value = self._old.get(key)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        self._young[key] = value
        if len(self._young) >= self._half:
            self._old, self._young = self._young, {}

    def known(self, previous: Any, unit: Any, trusted: bool) -> tuple[Any, ...] | None:
        """What was kept for `unit` after `previous` when `unit` is the very same object."""
        if not trusted:
            return None
        key = (previous, id(unit))
        entry: tuple[Any, ...] | None = self._young.get(key)  # the common case, inlined
        if entry is None:
            entry = self.get(key)
        return entry if entry is not None and entry[0] is unit else None

    def remember(self, previous: Any, unit: Any, trusted: bool, *value: Any) -> None:
        """Keep `value` for this very object after `previous` (only for unmutated payloads)."""
        if trusted:
            self.put((previous, id(unit)), (unit, *value))

    def __len__(self) -> int:
        return len(self._young) + len(self._old)


def remembered(
    memo: ChainMemo | None, tag: str, unit: Any, trusted: bool, make: Callable[[Any], T]
) -> T:
    """`make(unit)` for a unit whose result does not depend on where it stands, kept in
    `memo` under `tag` and the unit's content (and its identity, when `trusted`)."""
    if memo is None:
        return make(unit)
    known = memo.known(tag, unit, trusted)
    if known is not None:
        return known[1]  # type: ignore[no-any-return]
    key = (tag, content_key(unit))
    value: T | None = memo.get(key)
    if value is None:
        value = make(unit)
        memo.put(key, value)
    memo.remember(tag, unit, trusted, value)
    return value
