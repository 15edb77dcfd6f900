"""Streamed responses reassemble into exactly the non-streamed message, for every dialect.

Each body goes out as the provider's real event sequence (as SSE frames) and is read
back through the SSE decoder and the dialect's accumulator; the parsed message must
equal the one parsed from the body itself, tool-call arguments byte for byte.
"""

from __future__ import annotations

from typing import Any

import pytest

from stoker.errors import ProviderError
from stoker.wire.blocks import TextBlock, ThinkingBlock, ToolUseBlock
from stoker.wire.dialects import (
    anthropic,
    anthropic_stream,
    openai_chat,
    openai_chat_stream,
    openai_responses,
    openai_responses_stream,
)
from stoker.wire.dialects.sse import Decoder
from stoker.wire.messages import AssistantMessage
from stoker.wire.usage import Usage

USAGE = Usage(uncached=3, written_5m=1200, written_1h=0, read=2400, output=57)
LONG = "The plan has three parts. " * 7
MESSAGE = AssistantMessage(
    content=(
        ThinkingBlock(thinking="Which file is meant? " * 3, signature="c2lnbmF0dXJl" * 4),
        TextBlock(text=LONG),
        ToolUseBlock(id="call_1", name="read_file", input_json='{"path":"plan.md","lines":[1,20]}'),
        ToolUseBlock(id="call_2", name="search", input_json='{"z_last":1,"a_first":"ü"}'),
    ),
    stop_reason="tool_use",
    id="msg_1",
)
# OpenAI hashes the arguments string: odd spacing must survive the stream as sent.
OPENAI_MESSAGE = AssistantMessage(
    content=(
        TextBlock(text=LONG),
        ToolUseBlock(id="call_1", name="read_file", input_json='{ "path" :  "plan.md" }'),
        ToolUseBlock(id="call_2", name="search", input_json='{"q": "x",\n "n": 2}'),
    ),
    stop_reason="tool_use",
    id="resp_1",
)


def _through_sse(frames: Any, accumulator: Any) -> tuple[Any, list[str]]:
    decoder = Decoder()
    deltas = []
    for line in b"".join(frames).decode().split("\n"):
        frame = decoder.feed(line)
        if frame is not None and (text := accumulator.feed_frame(frame[1])):
            deltas.append(text)
    assert accumulator.done
    return accumulator.body(), deltas


def test_anthropic_stream_reassembles_the_message_exactly() -> None:
    body = anthropic.render_response(MESSAGE, USAGE, "claude-sonnet-4-6")
    streamed, deltas = _through_sse(anthropic_stream.frames(body), anthropic_stream.Accumulator())
    assert anthropic.parse_response(streamed) == anthropic.parse_response(body)
    assert anthropic.parse_response(streamed)[0].content == MESSAGE.content
    assert "".join(deltas) == LONG
    assert len(deltas) > 1


def test_anthropic_event_sequence_is_the_real_one() -> None:
    body = anthropic.render_response(MESSAGE, USAGE, "claude-sonnet-4-6")
    events = list(anthropic_stream.events(body))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 4
    deltas = {e["delta"]["type"] for e in events if e["type"] == "content_block_delta"}
    assert deltas == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    start = events[0]["message"]["usage"]
    assert (start["cache_read_input_tokens"], start["cache_creation_input_tokens"]) == (2400, 1200)
    assert events[-2]["usage"]["output_tokens"] == 57  # cumulative, final count


def test_anthropic_error_event_raises_with_its_status() -> None:
    accumulator = anthropic_stream.Accumulator()
    with pytest.raises(ProviderError) as caught:
        accumulator.feed(anthropic_stream.error_event(529, "Overloaded"))
    assert caught.value.status == 529


@pytest.mark.parametrize("include_usage", [True, False])
def test_chat_stream_reassembles_the_message_exactly(include_usage: bool) -> None:
    body = openai_chat.render_response(OPENAI_MESSAGE, USAGE, "gpt-5.6")
    streamed, deltas = _through_sse(
        openai_chat_stream.frames(body, include_usage=include_usage),
        openai_chat_stream.Accumulator(),
    )
    message, usage = openai_chat.parse_response(streamed)
    assert message == openai_chat.parse_response(body)[0]
    assert [b.input_json for b in message.tool_calls] == [
        '{ "path" :  "plan.md" }',
        '{"q": "x",\n "n": 2}',
    ]
    assert "".join(deltas) == LONG
    assert usage == (openai_chat.parse_response(body)[1] if include_usage else Usage())


def test_chat_stream_ends_with_a_usage_chunk_without_choices() -> None:
    body = openai_chat.render_response(OPENAI_MESSAGE, USAGE, "gpt-5.6")
    chunks = list(openai_chat_stream.chunks(body, include_usage=True))
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 2400
    assert all(c["usage"] is None for c in chunks[:-1])
    assert "usage" not in list(openai_chat_stream.chunks(body, include_usage=False))[-1]


def test_responses_stream_reassembles_the_message_exactly() -> None:
    message = AssistantMessage(
        content=(ThinkingBlock(thinking="plan", signature="enc-xyz"), *OPENAI_MESSAGE.content),
        stop_reason="tool_use",
        id="resp_2",
    )
    body = openai_responses.render_response(message, USAGE, "gpt-5.6")
    streamed, deltas = _through_sse(
        openai_responses_stream.frames(body), openai_responses_stream.Accumulator()
    )
    assert openai_responses.parse_response(streamed) == openai_responses.parse_response(body)
    assert "".join(deltas) == LONG
    kinds = [e["type"] for e in openai_responses_stream.events(body)]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    assert "response.reasoning_summary_text.delta" in kinds


def test_responses_accumulator_fills_an_empty_final_output_from_the_items() -> None:
    body = openai_responses.render_response(OPENAI_MESSAGE, USAGE, "gpt-5.6")
    accumulator = openai_responses_stream.Accumulator()
    for event in openai_responses_stream.events(body):
        if event["type"] == "response.completed":
            event = {**event, "response": {**event["response"], "output": []}}
        accumulator.feed(event)
    assert openai_responses.parse_response(accumulator.body()) == openai_responses.parse_response(
        body
    )


def test_sse_decoder_reads_multiline_data_comments_and_a_missing_last_blank_line() -> None:
    decoder = Decoder()
    frames = [decoder.feed(line) for line in [": keep-alive", "event: x", "data: a", "data: b", ""]]
    assert frames[-1] == ("x", "a\nb")
    assert decoder.feed("data: tail") is None
    assert decoder.flush() == (None, "tail")
