"""Incremental rendering of an append-only history.

A session passes one memo dict per lineage in `Request.render_memo`; a dialect keeps
the wire items it rendered so far and renders only the messages appended since, so a
turn costs the same at message 10 and at message 10,000. Without a memo every message
is rendered (each message still memoizes its own wire form).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stoker.wire.messages import Message
from stoker.wire.request import Request


def rendered_history(
    request: Request, dialect: str, render: Callable[[Message], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Wire items for `request.messages` (a fresh list the caller may modify)."""
    messages = request.messages
    memo = request.render_memo
    if memo is None:
        return [item for m in messages for item in render(m)]
    count, items, last = memo.get(dialect, (0, [], None))
    # The memo is valid only for an extension of what it rendered (guarded by identity).
    if count > len(messages) or (count and messages[count - 1] is not last):
        count, items = 0, []
    for m in messages[count:]:
        items.extend(render(m))
    memo[dialect] = (len(messages), items, messages[-1] if messages else None)
    return list(items)
