"""Chat Completions streaming: a ChatCompletion as its chunk sequence, and back.

`chunks(body)` is what the API sends with `stream: true`: a first chunk with the role,
content deltas, tool-call deltas (the first one of a call carries its id and name, the
rest carry pieces of the `arguments` string), a chunk with the finish reason and, when
the request set `stream_options.include_usage`, a last chunk with no choices and the
usage; then `data: [DONE]`. `Accumulator` joins the chunks back into the ChatCompletion
a non-streamed call returns. Arguments are joined as received, never re-serialized:
OpenAI hashes the string, so its bytes are part of the cache key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.errors import ProviderError
from stoker.wire.dialects._shape import malformed
from stoker.wire.dialects.sse import DONE, Accumulating, frame, pieces


def chunks(body: dict[str, Any], *, include_usage: bool = True) -> Iterator[dict[str, Any]]:
    """The chunks that deliver the ChatCompletion `body`: each choice's deltas in turn
    (tagged with its index), then the usage chunk when asked for."""
    base = {
        "id": body.get("id", ""),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model", ""),
    }
    for key in ("service_tier", "system_fingerprint", "provider"):  # provider: OpenRouter's
        if key in body:
            base[key] = body[key]
    tail = {"usage": None} if include_usage else {}
    for choice in body.get("choices") or [{}]:
        yield from _choice_chunks(base, tail, choice)
    if include_usage:
        # llama.cpp's server sends its `timings` (cache_n, prompt_n) on the last chunk.
        timings = {"timings": body["timings"]} if "timings" in body else {}
        yield {**base, "choices": [], "usage": body.get("usage"), **timings}


def _choice_chunks(
    base: dict[str, Any], tail: dict[str, Any], choice: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    message = choice.get("message") or {}
    index = choice.get("index", 0)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [out], **tail}

    yield chunk({"role": "assistant", "content": ""})
    for key in ("reasoning_content", "content", "refusal"):
        if message.get(key):
            for piece in pieces(message[key]):
                yield chunk({key: piece})
    for n, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        head = {"name": function.get("name", ""), "arguments": ""}
        first = {"index": n, "id": call.get("id"), "type": "function", "function": head}
        yield chunk({"tool_calls": [first]})
        for piece in pieces(function.get("arguments", "")):
            yield chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]})
    yield chunk({}, choice.get("finish_reason") or "stop")


def encode(chunk: dict[str, Any]) -> bytes:
    """One chunk as its SSE frame (Chat names no events)."""
    return frame(chunk)


def frames(body: dict[str, Any], *, include_usage: bool = True) -> Iterator[bytes]:
    """`chunks(body)` as SSE frames, then `[DONE]`."""
    for c in chunks(body, include_usage=include_usage):
        yield encode(c)
    yield frame(DONE)


def error_event(status: int, message: str) -> dict[str, Any]:
    """What OpenAI sends in place of a chunk when a stream fails after it started."""
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class Accumulator(Accumulating):
    """Folds chunks back into a ChatCompletion body; `feed` returns each text delta."""

    unit = "stream chunk"

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._text: dict[str, list[str]] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._timings: dict[str, Any] | None = None
        self.done = False
        self.thinking: str | None = None  # the reasoning delta of the chunk just fed

    def ended(self) -> None:
        self.done = True

    def feed(self, chunk: dict[str, Any]) -> str | None:
        if "error" in chunk:  # some servers report a failure as a chunk
            error = (
                chunk["error"] if isinstance(chunk["error"], dict) else {"message": chunk["error"]}
            )
            limited = "rate_limit" in f"{error.get('type')} {error.get('code')}"
            raise ProviderError(
                f"the stream failed: {error.get('message', 'no message')}",
                provider="openai",
                status=429 if limited else 500,
            )
        self.thinking = None
        for key in ("id", "created", "model"):
            self._head.setdefault(key, chunk.get(key))
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        if chunk.get("timings"):  # llama.cpp reports cache_n on the last chunk
            self._timings = chunk["timings"]
        emitted: list[str] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("reasoning_content", "content", "refusal"):
                if delta.get(key):
                    self._text.setdefault(key, []).append(delta[key])
                    if key == "content":
                        emitted.append(delta[key])
                    elif key == "reasoning_content":
                        self.thinking = str(delta[key])
            for call in delta.get("tool_calls") or ():
                self._call(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return "".join(emitted) or None

    def _call(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        call = self._calls.setdefault(
            self._implied_index(delta) if index is None else index,
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if delta.get("id"):
            call["id"] = delta["id"]
        function = delta.get("function") or {}
        for key in ("name", "arguments"):
            if function.get(key):
                call["function"][key] += function[key]

    def _implied_index(self, delta: dict[str, Any]) -> int:
        """Where a delta without `index` belongs (some servers leave it out): one that
        names a new call - another id, or a name while the current call has one - starts
        the next call; anything else continues the current one. Without this, parallel
        calls fold into one call with their names and arguments run together."""
        if not self._calls:
            return 0
        last = max(self._calls)
        current = self._calls[last]
        function = delta.get("function") or {}
        new_id = bool(delta.get("id")) and bool(current["id"]) and delta["id"] != current["id"]
        new_name = bool(function.get("name")) and bool(current["function"]["name"])
        return last + 1 if new_id or new_name else last

    def body(self) -> dict[str, Any]:
        """The ChatCompletion the chunks described."""
        with malformed("streamed ChatCompletion"):  # text pieces or call indexes of odd types
            message = self._message()
        out: dict[str, Any] = {
            "id": self._head.get("id") or "",
            "object": "chat.completion",
            "created": self._head.get("created") or 0,
            "model": self._head.get("model") or "",
            "choices": [
                {"index": 0, "message": message, "finish_reason": self._finish, "logprobs": None}
            ],
            "usage": self._usage or {},
        }
        if self._timings is not None:
            out["timings"] = self._timings
        return out

    def _message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant"}
        if "reasoning_content" in self._text:
            message["reasoning_content"] = "".join(self._text["reasoning_content"])
        content = self._text.get("content")
        message["content"] = "".join(content) if content else None
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        refusal = self._text.get("refusal")
        message["refusal"] = "".join(refusal) if refusal else None
        return message
