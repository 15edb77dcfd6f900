"""Incremental rendering of an append-only history.

A session passes one memo dict per lineage in `Request.render_memo`; a dialect keeps
the wire items it rendered so far and renders only the messages appended since, so a
turn costs the same at message 10 and at message 10,000. Without a memo every message
is rendered (each message still memoizes its own wire form).

The memo's dicts and lists are reused by every later request of the lineage, its forks
and its sub-agents, so they must never reach code that could change them: a payload
leaves a dialect `detached` unless its caller asks for the shared containers and
promises never to change them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from stoker.wire.blocks import Block
from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix
from stoker.wire.request import Request

T = TypeVar("T")


def kept_on(owner: Message | Prefix, dialect: str, make: Callable[[], T]) -> T:
    """`make()` once per dialect, kept in the owner's `wire_memo`: a message or a prefix
    renders the same every time, so its wire form is shared and must never be mutated."""
    cached: T | None = owner.wire_memo.get(dialect)
    if cached is None:
        cached = make()
        owner.wire_memo[dialect] = cached
    return cached


def content_message(
    message: Message, dialect: str, render: Callable[[Block], dict[str, Any]]
) -> list[dict[str, Any]]:
    """`message` as the one item of the APIs that keep its role and its blocks in order
    (Anthropic's Messages, Bedrock's Converse), rendered once per dialect."""
    content = message.content
    return kept_on(
        message, dialect, lambda: [{"role": message.role, "content": [render(b) for b in content]}]
    )


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


def detached(payload: dict[str, Any]) -> dict[str, Any]:
    """A copy of every dict and list in `payload`; strings and numbers are shared, being
    immutable. A provider may then change its payload without changing the prefix.

    Iterative, not recursive: tool-call arguments can nest as deep as the JSON parser
    goes, deeper than Python's recursion limit allows from inside a turn.
    """
    root = payload.copy()
    stack: list[dict[str, Any] | list[Any]] = [root]
    pop, push = stack.pop, stack.append
    while stack:
        container = pop()
        if isinstance(container, dict):
            for key, value in container.items():
                kind = type(value)
                if kind is dict or kind is list:
                    container[key] = value = value.copy()
                    push(value)
        else:
            for i, value in enumerate(container):
                kind = type(value)
                if kind is dict or kind is list:
                    container[i] = value = value.copy()
                    push(value)
    return root
