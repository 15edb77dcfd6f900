"""`streamGenerateContent?alt=sse`: a GenerateContentResponse as its chunks, and back.

Each SSE frame is a whole GenerateContentResponse carrying the next parts of the one
candidate: text and thought text in pieces, a function call whole. The last chunk
carries `finishReason` and `usageMetadata`. `Accumulator` joins the pieces back: a text
part continues the previous one when both are text of the same kind (thought or not)
and the previous carries no signature yet, which is where Gemini puts a signature: on
the last piece of the part it signs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.errors import ProviderError, WireError
from stoker.wire.dialects.sse import Accumulating, frame, pieces

_STATUS = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def _chunk(body: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    return {
        "candidates": [candidate],
        "modelVersion": body.get("modelVersion", ""),
        "responseId": body.get("responseId", ""),
    }


def _pieces_of(part: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "text" not in part or "functionCall" in part:
        yield part
        return
    texts = pieces(str(part["text"]))
    bare = {k: v for k, v in part.items() if k not in ("text", "thoughtSignature")}
    for n, text in enumerate(texts):
        piece = {**bare, "text": text}
        if n == len(texts) - 1 and "thoughtSignature" in part:
            piece["thoughtSignature"] = part["thoughtSignature"]
        yield piece


def events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks that deliver the response `body`."""
    candidate = (body.get("candidates") or [{}])[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    out = [_chunk(body, [piece]) for part in parts for piece in _pieces_of(part)]
    if not out:
        out = [_chunk(body, [])]
    last = out[-1]
    last["candidates"][0]["finishReason"] = candidate.get("finishReason", "STOP")
    last["usageMetadata"] = body.get("usageMetadata") or {}
    yield from out


def encode(event: dict[str, Any]) -> bytes:
    """One chunk as its SSE frame (Gemini names no events)."""
    return frame(event)


def frames(body: dict[str, Any]) -> Iterator[bytes]:
    for event in events(body):
        yield encode(event)


def error_event(status: int, message: str) -> dict[str, Any]:
    """What the API sends when a stream fails after it started: an error object."""
    return {
        "error": {"code": status, "message": message, "status": _STATUS.get(status, "INTERNAL")}
    }


class Accumulator(Accumulating):
    """Joins a stream's chunks into one response; `feed` returns each text delta, and
    `thinking` holds the thought text of the chunk just fed (None for others)."""

    unit = "stream chunk"

    def __init__(self) -> None:
        self._parts: list[dict[str, Any]] = []
        self._last: dict[str, Any] | None = None
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}
        self.thinking: str | None = None

    @property
    def done(self) -> bool:
        return self._finish is not None

    def feed(self, event: dict[str, Any]) -> str | None:
        self.thinking = None
        if "error" in event:
            error = event["error"] or {}
            raise ProviderError(
                f"the stream failed: {error.get('message', 'no message')}",
                provider="google",
                status=int(error.get("code") or 500),
            )
        self._last = event
        if event.get("usageMetadata"):
            self._usage = event["usageMetadata"]
        text: list[str] = []
        thought: list[str] = []
        for candidate in event.get("candidates") or ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                self._add(part)
                if "text" in part and "functionCall" not in part:
                    (thought if part.get("thought") else text).append(str(part["text"]))
            if candidate.get("finishReason"):
                self._finish = str(candidate["finishReason"])
        if thought:
            self.thinking = "".join(thought)
        return "".join(text) or None

    def _add(self, part: dict[str, Any]) -> None:
        previous = self._parts[-1] if self._parts else None
        joins = (
            previous is not None
            and "text" in part
            and "text" in previous
            and "functionCall" not in part
            and bool(part.get("thought")) == bool(previous.get("thought"))
            and "thoughtSignature" not in previous
        )
        if previous is not None and joins:
            merged = {**previous, "text": str(previous["text"]) + str(part["text"])}
            if "thoughtSignature" in part:
                merged["thoughtSignature"] = part["thoughtSignature"]
            self._parts[-1] = merged
        else:
            self._parts.append(dict(part))

    def body(self) -> dict[str, Any]:
        """The GenerateContentResponse the chunks described."""
        if self._last is None or self._finish is None:
            raise WireError("the stream ended before a chunk with finishReason")
        candidate = {
            "content": {"role": "model", "parts": self._parts},
            "finishReason": self._finish,
            "index": 0,
        }
        return {
            "candidates": [candidate],
            "usageMetadata": self._usage,
            "modelVersion": self._last.get("modelVersion", ""),
            "responseId": self._last.get("responseId", ""),
        }
