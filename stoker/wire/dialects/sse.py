"""Server-sent events framing, for both directions of a streamed response.

The simulator writes a response as SSE frames and the adapters read frames back into
events; both use this one framing so what one writes the other reads. Event payloads
are compact JSON, as the providers send them.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from stoker.errors import WireError
from stoker.wire.dialects._shape import malformed

DONE = "[DONE]"  # Chat Completions ends its stream with this data line instead of an event


def frame(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One SSE frame: an optional `event:` line, `data:` lines, a blank line."""
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    lines = [f"event: {event}"] if event else []
    lines.extend(f"data: {line}" for line in text.split("\n"))
    # "replace": a lone surrogate a client sent (and a server echoes) cannot be UTF-8
    return ("\n".join(lines) + "\n\n").encode("utf-8", "replace")


class Decoder:
    """Turns SSE lines (without their newline) into `(event, data)` pairs at each blank line."""

    def __init__(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str | None, str] | None:
        """The completed frame when `line` ends one, else None."""
        line = line.rstrip("\r")
        if not line:
            return self.flush()
        if line.startswith(":"):  # a comment, used as keep-alive
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def flush(self) -> tuple[str | None, str] | None:
        """The pending frame, if any (a stream may end without the last blank line)."""
        if self._event is None and not self._data:
            return None
        out = (self._event, "\n".join(self._data))
        self._event, self._data = None, []
        return out


def event_json(data: str) -> dict[str, Any] | None:
    """The event object of a frame's data, None for the `[DONE]` sentinel."""
    if data.strip() == DONE:
        return None
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise WireError(f"a streamed event is not JSON: {data[:120]!r}") from exc
    if not isinstance(value, dict):
        raise WireError(f"a streamed event is not a JSON object: {data[:120]!r}")
    return value


def named_frame(event: dict[str, Any]) -> bytes:
    """An event as its SSE frame, named after its type (Anthropic's and Responses' way)."""
    return frame(event, event=event["type"])


class Accumulating:
    """The SSE side of a stream's accumulator: each frame's data is one JSON event for
    `feed`, whose KeyErrors and TypeErrors on an event of the wrong shape become a
    `WireError` quoting it. The `[DONE]` sentinel feeds nothing; it calls `ended`."""

    unit: ClassVar[str] = "stream event"  # what the API calls one frame's event

    def feed(self, event: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def ended(self) -> None:
        """The stream said `[DONE]` (only Chat Completions does)."""

    def feed_frame(self, data: str) -> str | None:
        event = event_json(data)
        if event is None:
            self.ended()
            return None
        with malformed(f"{self.unit} {data[:120]!r}"):
            return self.feed(event)


def pieces(text: str, size: int = 24) -> list[str]:
    """`text` cut into deltas the way a model streams it (deterministic, never empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
