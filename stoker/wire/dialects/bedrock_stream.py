"""Bedrock's `converse_stream`: a Converse response as its events, their binary frames,
and the events folded back into a response.

ConverseStream answers `application/vnd.amazon.eventstream`: binary messages, each a
prelude (total length, headers length, CRC32 of the two), headers (`:event-type`,
`:content-type`, `:message-type`), a JSON payload and a CRC32 of everything before it.
The events: `messageStart`, per block `contentBlockStart` (tool calls only),
`contentBlockDelta`s and `contentBlockStop`, then `messageStop` and `metadata` (usage).
A failure mid-stream is a message of type `exception` (`throttlingException`, ...).
`Accumulator` folds the events the SDK yields (`{"messageStart": {...}}`) into the body
`converse` returns, so one parser reads both.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from stoker.errors import ProviderError
from stoker.wire.dialects._shape import malformed
from stoker.wire.dialects.sse import pieces

Event = tuple[str, dict[str, Any]]  # (event type, payload)
EXCEPTIONS = {
    429: "throttlingException",
    400: "validationException",
    500: "internalServerException",
    503: "serviceUnavailableException",
}


def events(body: dict[str, Any]) -> Iterator[Event]:
    """The events that deliver the Converse response `body`."""
    yield "messageStart", {"role": "assistant"}
    for index, block in enumerate(body["output"]["message"]["content"]):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            yield "contentBlockStart", {"start": start, "contentBlockIndex": index}
            args = json.dumps(use.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
            for piece in pieces(args):
                delta = {"toolUse": {"input": piece}}
                yield "contentBlockDelta", {"delta": delta, "contentBlockIndex": index}
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]
            if "redactedContent" in reasoning:
                deltas = [{"redactedContent": reasoning["redactedContent"]}]
            else:
                text = reasoning["reasoningText"]
                deltas = [{"text": p} for p in pieces(text["text"])]
                if text.get("signature"):
                    deltas.append({"signature": text["signature"]})
            for d in deltas:
                delta = {"reasoningContent": d}
                yield "contentBlockDelta", {"delta": delta, "contentBlockIndex": index}
        else:
            for piece in pieces(block.get("text", "")):
                yield "contentBlockDelta", {"delta": {"text": piece}, "contentBlockIndex": index}
        yield "contentBlockStop", {"contentBlockIndex": index}
    yield "messageStop", {"stopReason": body.get("stopReason", "end_turn")}
    yield "metadata", {"usage": body.get("usage") or {}, "metrics": body.get("metrics") or {}}


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
    return (
        struct.pack(">B", len(raw_name))
        + raw_name
        + b"\x07"  # string
        + struct.pack(">H", len(raw_value))
        + raw_value
    )


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode(event: Event) -> bytes:
    kind, payload = event
    headers = {
        ":event-type": kind,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, json.dumps(payload, separators=(",", ":")).encode("utf-8"))


def frames(body: dict[str, Any]) -> Iterator[bytes]:
    for event in events(body):
        yield encode(event)


def exception(status: int, text: str) -> bytes:
    """The message a stream that fails after it started ends with."""
    headers = {
        ":exception-type": EXCEPTIONS.get(status, "internalServerException"),
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return message(headers, json.dumps({"message": text}).encode("utf-8"))


class Accumulator:
    """Folds the SDK's stream events back into a Converse response body; `feed` returns
    each text delta (and sets `thinking` to each reasoning one)."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._stop = "end_turn"
        self._meta: dict[str, Any] = {}
        self.thinking: str | None = None

    def feed(self, event: dict[str, Any]) -> str | None:
        self.thinking = None
        for kind, data in event.items():
            if kind.endswith("Exception"):
                status = 429 if kind == "throttlingException" else 500
                raise ProviderError(
                    f"the stream failed: {(data or {}).get('message', kind)}",
                    provider="bedrock",
                    status=status,
                )
            with malformed(f"stream event {kind}"):
                return self._feed(kind, data)
        return None

    def _feed(self, kind: str, data: dict[str, Any]) -> str | None:
        if kind == "contentBlockStart":
            use = data["start"].get("toolUse")
            if use is not None:
                block = {"toolUse": {**use, "input": ""}}
                self._blocks[data["contentBlockIndex"]] = block
        elif kind == "contentBlockDelta":
            index, delta = data["contentBlockIndex"], data["delta"]
            if "text" in delta:
                block = self._blocks.setdefault(index, {"text": ""})
                block["text"] += delta["text"]
                return str(delta["text"])
            if "toolUse" in delta:
                self._blocks[index]["toolUse"]["input"] += delta["toolUse"]["input"]
            elif "reasoningContent" in delta:
                self._reasoning(index, delta["reasoningContent"])
        elif kind == "messageStop":
            self._stop = data.get("stopReason") or "end_turn"
        elif kind == "metadata":
            self._meta = data
        return None

    def _reasoning(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.setdefault(index, {"reasoningContent": {}})
        reasoning = block["reasoningContent"]
        if "redactedContent" in delta:
            reasoning["redactedContent"] = delta["redactedContent"]
            return
        text = reasoning.setdefault("reasoningText", {"text": ""})
        if "text" in delta:
            text["text"] += delta["text"]
            self.thinking = str(delta["text"])
        if "signature" in delta:
            text["signature"] = delta["signature"]

    def body(self) -> dict[str, Any]:
        """The Converse response the events described (tool inputs parsed, key order kept)."""
        content = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if "toolUse" in block:
                use = block["toolUse"]
                raw = use["input"]
                with malformed("streamed tool input"):
                    args = json.loads(raw) if raw.strip() else {}
                block = {"toolUse": {**use, "input": args}}
            content.append(block)
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self._stop,
            "usage": self._meta.get("usage") or {},
            "metrics": self._meta.get("metrics") or {},
        }
