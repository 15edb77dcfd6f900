"""Anthropic Messages streaming: a response body as its SSE event sequence, and back.

`events(body)` is what the API sends for a response with `stream: true`:
`message_start` (usage with the cache fields already set), `ping`, then per content
block `content_block_start` / `content_block_delta`s (`text_delta`, `input_json_delta`,
`thinking_delta`, `signature_delta`) / `content_block_stop`, then `message_delta`
(stop reason and cumulative usage) and `message_stop`. `Accumulator` reassembles the
events into the body a non-streamed call returns, so `anthropic.parse_response` reads
both the same way and a streamed turn is byte-for-byte the non-streamed one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from stoker.errors import ProviderError, WireError
from stoker.wire.dialects._shape import malformed
from stoker.wire.dialects.sse import Accumulating, named_frame, pieces

# HTTP status <-> `error.type` of Anthropic's error bodies and mid-stream `error` events.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_STATUS = {kind: status for status, kind in ERROR_TYPES.items()}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block.get("type")

    def delta(payload: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": payload}

    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    else:  # redacted thinking and server blocks arrive whole
        start = block
    yield {"type": "content_block_start", "index": index, "content_block": start}
    if kind == "text":
        for piece in pieces(block["text"]):
            yield delta({"type": "text_delta", "text": piece})
    elif kind == "thinking":
        for piece in pieces(block["thinking"]):
            yield delta({"type": "thinking_delta", "thinking": piece})
        if block.get("signature"):
            yield delta({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        # Models emit the JSON with ", " and ": "; the receiver parses it, so spacing is moot.
        for piece in pieces(json.dumps(block.get("input", {}), ensure_ascii=False)):
            yield delta({"type": "input_json_delta", "partial_json": piece})
    yield {"type": "content_block_stop", "index": index}


def events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The stream of events that delivers the Messages response `body`."""
    usage = dict(body.get("usage") or {})
    head = {k: v for k, v in body.items() if k not in ("content", "usage")}
    # The output count is not known yet when message_start goes out.
    start_usage = {**usage, "output_tokens": min(1, usage.get("output_tokens") or 0)}
    message = {**head, "content": [], "stop_reason": None, "stop_sequence": None}
    yield {"type": "message_start", "message": {**message, "usage": start_usage}}
    yield {"type": "ping"}
    for index, block in enumerate(body.get("content") or ()):
        yield from _block_events(index, block)
    stop = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    yield {"type": "message_delta", "delta": stop, "usage": usage}
    yield {"type": "message_stop"}


encode = named_frame


def frames(body: dict[str, Any]) -> Iterator[bytes]:
    """`events(body)` as SSE frames."""
    return map(encode, events(body))


def error_event(status: int, message: str) -> dict[str, Any]:
    """The `error` event the API sends when a stream fails after it started."""
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


class Accumulator(Accumulating):
    """Folds streamed events back into the response body; `feed` returns each text delta,
    and `thinking` holds the thinking delta of the event just fed (None for others)."""

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self.done = False
        self.thinking: str | None = None

    def feed(self, event: dict[str, Any]) -> str | None:
        self.thinking = None
        kind = event.get("type")
        if kind == "message_start":
            self._message = dict(event["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
        elif kind == "content_block_start":
            index = event["index"]
            self._blocks[index] = dict(event["content_block"])
            if self._blocks[index].get("type") == "tool_use":
                self._json[index] = []
        elif kind == "content_block_delta":
            return self._delta(self._blocks[event["index"]], event["index"], event["delta"])
        elif kind == "content_block_stop":
            index = event["index"]
            if index in self._json:
                raw = "".join(self._json.pop(index))
                try:
                    self._blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
                except (ValueError, RecursionError):
                    # The model's arguments, cut short or malformed: kept as text, so the
                    # call gets an error result the model sees instead of failing the turn.
                    self._blocks[index]["input"] = raw
        elif kind == "message_delta":
            message = self._started()
            message.update(event.get("delta") or {})
            # message_delta usage is cumulative; a null field keeps the message_start value.
            for key, value in (event.get("usage") or {}).items():
                if value is not None:
                    message["usage"][key] = value
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            error = event.get("error") or {}
            status = _STATUS.get(error.get("type", ""), 500)
            raise ProviderError(
                f"the stream failed: {error.get('message', 'no message')}",
                provider="anthropic",
                status=status,
            )
        return None

    def _delta(self, block: dict[str, Any], index: int, delta: dict[str, Any]) -> str | None:
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return str(delta["text"])
        if kind == "input_json_delta":
            self._json[index].append(delta["partial_json"])
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            self.thinking = str(delta["thinking"])
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta["citation"])
        return None

    def _started(self) -> dict[str, Any]:
        if self._message is None:
            raise WireError("the stream sent content before message_start")
        return self._message

    def body(self) -> dict[str, Any]:
        """The Messages response body the events described."""
        message = self._started()
        if not self.done:
            raise WireError("the stream ended before message_stop")
        with malformed("streamed Anthropic response"):  # block indexes of mixed types
            return {**message, "content": [self._blocks[i] for i in sorted(self._blocks)]}
