"""Responses API streaming: a Response as its event sequence, and back.

`events(body)` is what the API sends with `stream: true`: `response.created` and
`response.in_progress` (the response with no output yet), then per output item
`response.output_item.added`, its deltas (`response.output_text.delta`,
`response.function_call_arguments.delta`, `response.reasoning_summary_text.delta`, each
framed by its `*.added` / `*.done` events) and `response.output_item.done`, and last
`response.completed` (or `response.incomplete`) carrying the whole response with usage.
Every event has a `sequence_number`. `Accumulator` returns that final response, filling
its output from the `output_item.done` events when a server leaves it empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.errors import ProviderError, WireError
from stoker.wire.dialects._shape import malformed
from stoker.wire.dialects.sse import Accumulating, named_frame, pieces

_FINAL = ("response.completed", "response.incomplete")


def _message_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    ref = {"item_id": item.get("id", ""), "output_index": index}
    yield {
        "type": "response.output_item.added",
        "output_index": index,
        "item": {**item, "status": "in_progress", "content": []},
    }
    for c, part in enumerate(item.get("content") or ()):
        at = {**ref, "content_index": c}
        empty = {**part, "text": ""} if part.get("type") == "output_text" else part
        yield {"type": "response.content_part.added", **at, "part": empty}
        if part.get("type") == "output_text":
            for piece in pieces(part["text"]):
                yield {"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []}
            yield {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []}
        yield {"type": "response.content_part.done", **at, "part": part}


def _call_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    ref = {"item_id": item.get("id", ""), "output_index": index}
    added = {**item, "arguments": "", "status": "in_progress"}
    yield {"type": "response.output_item.added", "output_index": index, "item": added}
    arguments = item.get("arguments", "")
    for piece in pieces(arguments):
        yield {"type": "response.function_call_arguments.delta", **ref, "delta": piece}
    yield {"type": "response.function_call_arguments.done", **ref, "arguments": arguments}


def _reasoning_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    ref = {"item_id": item.get("id", ""), "output_index": index}
    added = {**item, "summary": []}
    yield {"type": "response.output_item.added", "output_index": index, "item": added}
    for s, part in enumerate(item.get("summary") or ()):
        at = {**ref, "summary_index": s}
        yield {"type": "response.reasoning_summary_part.added", **at, "part": {**part, "text": ""}}
        for piece in pieces(part.get("text", "")):
            yield {"type": "response.reasoning_summary_text.delta", **at, "delta": piece}
        yield {"type": "response.reasoning_summary_text.done", **at, "text": part.get("text", "")}
        yield {"type": "response.reasoning_summary_part.done", **at, "part": part}


def events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The stream of events that delivers the Response `body`."""
    pending = {**body, "status": "in_progress", "output": [], "usage": None}
    pending["incomplete_details"] = None
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for index, item in enumerate(body.get("output") or ()):
        kind = item.get("type")
        if kind == "message":
            out.extend(_message_events(index, item))
        elif kind == "function_call":
            out.extend(_call_events(index, item))
        elif kind == "reasoning":
            out.extend(_reasoning_events(index, item))
        else:
            out.append({"type": "response.output_item.added", "output_index": index, "item": item})
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    final = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    out.append({"type": final, "response": body})
    for n, event in enumerate(out):
        yield {**event, "sequence_number": n}


encode = named_frame


def frames(body: dict[str, Any]) -> Iterator[bytes]:
    """`events(body)` as SSE frames."""
    return map(encode, events(body))


def error_event(status: int, message: str) -> dict[str, Any]:
    """The `error` event the API sends when a stream fails after it started."""
    code = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"type": "error", "code": code, "message": message, "param": None}


class Accumulator(Accumulating):
    """Keeps the final response of a stream; `feed` returns each output text delta, and
    `thinking` holds the reasoning summary delta of the event just fed (None for others)."""

    def __init__(self) -> None:
        self._items: dict[int, dict[str, Any]] = {}
        self._final: dict[str, Any] | None = None
        self.thinking: str | None = None

    @property
    def done(self) -> bool:
        return self._final is not None

    def feed(self, event: dict[str, Any]) -> str | None:
        self.thinking = None
        kind = event.get("type")
        if kind == "response.output_text.delta":
            return str(event.get("delta", ""))
        if kind == "response.reasoning_summary_text.delta":
            self.thinking = str(event.get("delta", ""))
        if kind == "response.output_item.done":
            self._items[event["output_index"]] = event["item"]
        elif kind in _FINAL:
            self._final = event["response"]
        elif kind in ("response.failed", "error"):
            response = event.get("response") or {}
            error = response.get("error") or event
            limited = error.get("code") == "rate_limit_exceeded"
            raise ProviderError(
                f"the stream failed: {error.get('message', 'no message')}",
                provider="openai",
                status=429 if limited else 500,
            )
        return None

    def body(self) -> dict[str, Any]:
        """The Response the events described."""
        if self._final is None:
            raise WireError("the stream ended before response.completed")
        with malformed("streamed Response"):
            if self._final.get("output"):
                return self._final
            return {**self._final, "output": [self._items[i] for i in sorted(self._items)]}
