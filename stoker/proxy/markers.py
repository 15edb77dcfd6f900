"""Anthropic `cache_control` markers in a client's own request body: read, removed, placed.

The proxy edits the client's JSON, never re-renders it: fields Stoker does not model
(temperature, metadata, stop sequences, beta flags) pass through untouched. A marker
changes what is cached, not what the model reads. A string `system` or message
`content` is the same prompt as one text block, so the proxy turns it into one where a
marker must go. Places are `Breakpoint`s (message None: the end of tools + system).
"""

from __future__ import annotations

from typing import Any

from stoker.wire.request import Breakpoint


def _ttl(marker: Any) -> str:
    return "1h" if isinstance(marker, dict) and marker.get("ttl") == "1h" else "5m"


def _blocks(container: dict[str, Any], key: str) -> list[Any]:
    value = container.get(key)
    if isinstance(value, str):
        value = [{"type": "text", "text": value}]
        container[key] = value
    return value if isinstance(value, list) else []


def read(payload: dict[str, Any]) -> tuple[Breakpoint, ...]:
    """The breakpoints a body asks for, in render order."""
    found: list[Breakpoint] = []
    prefix = [*(payload.get("tools") or ()), *_listed(payload.get("system"))]
    for item in prefix:
        if isinstance(item, dict) and "cache_control" in item:
            found.append(Breakpoint(message=None, ttl=_ttl(item["cache_control"])))  # type: ignore[arg-type]
    for m, message in enumerate(payload.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        for b, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and "cache_control" in block:
                ttl = _ttl(block["cache_control"])
                found.append(Breakpoint(message=m, block=b, ttl=ttl))  # type: ignore[arg-type]
    return tuple(found)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def strip(payload: dict[str, Any]) -> int:
    """Remove every marker; how many there were."""
    removed = 0
    items = [*_listed(payload.get("tools")), *_listed(payload.get("system"))]
    for message in _listed(payload.get("messages")):
        if isinstance(message, dict):
            items += _listed(message.get("content"))
    for item in items:
        if isinstance(item, dict) and item.pop("cache_control", None) is not None:
            removed += 1
    return removed


def place(payload: dict[str, Any], breakpoints: tuple[Breakpoint, ...]) -> None:
    """Put a marker at each breakpoint (the places come from a parse of this body)."""
    for bp in breakpoints:
        marker = {"type": "ephemeral", "ttl": bp.ttl}
        if bp.message is None:
            system = _blocks(payload, "system") if payload.get("system") else []
            target = system or _listed(payload.get("tools"))
            if target:
                target[-1] = {**target[-1], "cache_control": marker}
            continue
        content = _blocks(payload["messages"][bp.message], "content")
        content[bp.block] = {**content[bp.block], "cache_control": marker}


def describe(bp: Breakpoint) -> str:
    where = "tools+system" if bp.message is None else f"messages[{bp.message}].content[{bp.block}]"
    return f"{where} ({bp.ttl})"
