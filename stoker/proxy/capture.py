"""A forwarded response read back after the fact: the body the client received, as JSON.

The proxy passes bytes through as they arrive and keeps a copy; once the response is
complete this folds the copy into the body a non-streamed call returns (with the same
stream accumulators the adapters use), so a streamed call is recorded like a plain one.
"""

from __future__ import annotations

import json
from typing import Any

from stoker.errors import StokerError, WireError
from stoker.wire.dialects import anthropic_stream, openai_chat_stream, openai_responses_stream
from stoker.wire.dialects.sse import Decoder

_ACCUMULATORS: dict[str, Any] = {
    "anthropic": anthropic_stream.Accumulator,
    "openai_chat": openai_chat_stream.Accumulator,
    "openai_responses": openai_responses_stream.Accumulator,
}


def response_body(dialect: str, data: bytes, *, streamed: bool) -> dict[str, Any]:
    """The response body `data` carried; a `WireError` when it is not one of the API's."""
    if not streamed:
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise WireError(f"the upstream's response is not JSON: {data[:120]!r}") from exc
        if not isinstance(body, dict):
            raise WireError("the upstream's response is not a JSON object")
        return body
    accumulator = _ACCUMULATORS[dialect]()
    decoder = Decoder()
    try:
        for line in data.decode("utf-8").split("\n"):
            frame = decoder.feed(line)
            if frame is not None:
                accumulator.feed_frame(frame[1])
        frame = decoder.flush()
        if frame is not None:
            accumulator.feed_frame(frame[1])
        folded: dict[str, Any] = accumulator.body()
    except UnicodeDecodeError as exc:
        raise WireError("the upstream's stream is not UTF-8") from exc
    except StokerError as exc:  # a stream cut short or an error event: no usage to record
        raise WireError(f"the streamed response has no complete body: {exc}") from exc
    return folded
