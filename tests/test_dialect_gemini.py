"""The Gemini dialect: what a request renders to, that it reads back to the same values,
and the wire's quirks (thought signatures, proto field names, streamed chunks)."""

from __future__ import annotations

import json

from stoker.tools import tool
from stoker.wire.blocks import ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.dialects import gemini, gemini_caches, gemini_stream
from stoker.wire.messages import AssistantMessage, UserMessage, tool_results, user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import CacheObject, Request
from stoker.wire.usage import Usage


@tool
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return str(len(text.split()))


PREFIX = Prefix(
    params=CacheParams(model="gemini-2.5-flash"), tools=(word_count.spec_bytes,), system="Be brief."
)
HISTORY = (
    user_text("how many words in 'a b'?"),
    AssistantMessage(
        content=(
            ThinkingBlock(thinking="", signature="c2lnbmVk"),
            ToolUseBlock(id="call_1", name="word_count", input_json='{"text":"a b"}'),
        )
    ),
    tool_results([ToolResultBlock(tool_use_id="call_1", content="2")]),
    AssistantMessage(
        content=(ThinkingBlock(thinking="Counting.", signature="dGhvdWdodA=="), TextBlock(text="2"))
    ),
    UserMessage(
        content=(TextBlock(text="and this?"), ImageBlock(media_type="image/png", data="AA=="))
    ),
)


def test_a_request_renders_tools_system_and_contents_in_gemini_shape() -> None:
    body = gemini.render_request(Request(prefix=PREFIX, messages=HISTORY[:3], max_tokens=100))
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "word_count",
                    "description": "Count the words in a text.",
                    "parametersJsonSchema": json.loads(word_count.spec_bytes)["input_schema"],
                }
            ]
        }
    ]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"id": "call_1", "name": "word_count", "args": {"text": "a b"}},
                    "thoughtSignature": "c2lnbmVk",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "word_count",
                        "response": {"output": "2"},
                    }
                }
            ],
        },
    ]
    assert body["generationConfig"] == {"maxOutputTokens": 100}


def test_a_request_reads_back_to_the_same_prefix_and_history() -> None:
    request = Request(prefix=PREFIX, messages=HISTORY, max_tokens=64)
    back = gemini.parse_request(gemini.render_request(request))
    assert back.prefix == PREFIX
    assert back.messages == HISTORY
    assert back.max_tokens == 64


def test_a_request_naming_a_cache_sends_only_what_the_cache_does_not_hold() -> None:
    request = Request(
        prefix=PREFIX,
        messages=HISTORY,
        cache_object=CacheObject(name="cachedContents/x", messages=3),
    )
    body = gemini.render_request(request)
    assert body["cachedContent"] == "cachedContents/x"
    assert not {"tools", "systemInstruction", "toolConfig"} & set(body)
    assert (
        body["contents"]
        == gemini.render_request(Request(prefix=PREFIX, messages=HISTORY))["contents"][3:]
    )


def test_tool_choice_becomes_the_function_calling_mode() -> None:
    forced = Prefix(
        params=CacheParams(model="gemini-2.5-flash", tool_choice="tool:word_count"),
        tools=PREFIX.tools,
    )
    body = gemini.render_request(Request(prefix=forced, messages=HISTORY[:1]))
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["word_count"]}
    }
    assert gemini.parse_request(body).prefix.params.tool_choice == "tool:word_count"


def test_proto_field_names_read_as_json_names_but_free_form_keys_stay() -> None:
    sent = {
        "tools": [
            {
                "function_declarations": [
                    {"name": "f", "parameters_json_schema": {"snake_key": {"type": "string"}}}
                ]
            }
        ],
        "contents": [
            {"role": "user", "parts": [{"function_call": {"name": "f", "args": {"a_b": 1}}}]}
        ],
    }
    assert gemini.proto_json(sent) == {
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "f", "parametersJsonSchema": {"snake_key": {"type": "string"}}}
                ]
            }
        ],
        "contents": [
            {"role": "user", "parts": [{"functionCall": {"name": "f", "args": {"a_b": 1}}}]}
        ],
    }


def test_usage_counts_cached_tokens_inside_the_prompt_total() -> None:
    fields = gemini.usage_fields(Usage(uncached=30, read=2000, output=12), thoughts=4)
    assert fields == {
        "promptTokenCount": 2030,
        "cachedContentTokenCount": 2000,
        "candidatesTokenCount": 8,
        "thoughtsTokenCount": 4,
        "totalTokenCount": 2042,
    }
    assert gemini.parse_usage(fields) == Usage(uncached=30, read=2000, output=12)


def test_a_response_round_trips_through_its_stream() -> None:
    message = AssistantMessage(
        content=(
            ThinkingBlock(thinking="A long thought that streams in pieces.", signature="c2ln"),
            TextBlock(text="An answer long enough to arrive in several chunks, signed."),
            ThinkingBlock(thinking="", signature="c2lnMg=="),
            ToolUseBlock(id="call_9", name="word_count", input_json='{"text":"x y"}'),
        ),
        stop_reason="tool_use",
        id="r1",
    )
    body = gemini.render_response(
        message, Usage(uncached=5, read=2000, output=9), "gemini-2.5-flash"
    )
    reader = gemini_stream.Accumulator()
    texts = [t for e in gemini_stream.events(body) if (t := reader.feed(e))]
    assert "".join(texts) == "An answer long enough to arrive in several chunks, signed."
    assert gemini.parse_response(reader.body()) == gemini.parse_response(body)
    assert gemini.parse_response(body)[0] == message


def test_a_cache_object_round_trips() -> None:
    info = gemini_caches.CacheInfo(
        name="cachedContents/abc",
        model="gemini-2.5-flash",
        tokens=4000,
        created_at=1_790_000_000.0,
        expires_at=1_790_003_600.5,
        display_name="stoker/agent/s1",
    )
    assert gemini_caches.parse_cache(gemini_caches.render_cache(info)) == info
    assert gemini_caches.duration(3600) == "3600s"
    assert gemini_caches.parse_duration("90.5s") == 90.5
