"""Wire dialects: payloads round-trip, model output is replayed byte for byte, memos never leak."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import anthropic.types
import openai.types.chat
import openai.types.responses
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ProviderError, WireError
from stoker.wire.blocks import (
    DocumentBlock,
    ImageBlock,
    ImageRefBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from stoker.wire.canonical import canonical_json
from stoker.wire.dialects import (
    DIALECTS,
    anthropic_stream,
    dialect_module,
    openai_chat_stream,
    openai_responses_stream,
)
from stoker.wire.messages import AssistantMessage, Message, UserMessage, user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Breakpoint, Request
from stoker.wire.usage import Usage

OPENAI = ("openai_chat", "openai_responses")
ARGS = '{"b": 1,  "a":2}'  # odd spacing and key order: OpenAI hashes this string as is
SCHEMA = {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}
TOOLS = (
    canonical_json({"name": "list_files", "description": "List files.", "input_schema": SCHEMA}),
    canonical_json({"name": "read_file", "description": "Read a file.", "input_schema": SCHEMA}),
)
PARAMS = CacheParams(model="gpt-5.6", effort="high")
USAGE = Usage(uncached=120, written_5m=300, written_1h=80, read=2000, output=42)


def prefix(**changes: Any) -> Prefix:
    """A fresh prefix (its own wire memo) equal to every other one built the same way."""
    return Prefix(params=dataclasses.replace(PARAMS, **changes), tools=TOOLS, system="Be careful.")


def history() -> tuple[Message, ...]:
    """Fresh messages (empty memos) with every block kind a request can carry."""
    return (
        user_text("Read a.txt and b.txt.", note="Time: 10:00"),
        AssistantMessage(
            content=(
                TextBlock(text="Reading both."),
                ToolUseBlock(id="call_1", name="read_file", input_json=ARGS),
                ToolUseBlock(id="call_2", name="read_file", input_json='{"path":"b.txt"}'),
            )
        ),
        UserMessage(
            content=(
                ToolResultBlock(tool_use_id="call_1", content="alpha\n"),
                ToolResultBlock(tool_use_id="call_2", content="no such file", is_error=True),
                TextBlock(text="Also this image:"),
                ImageBlock(media_type="image/png", data="iVBORw0KGgo="),
            )
        ),
        AssistantMessage(content=(TextBlock(text="a.txt says alpha."),)),
        user_text("Thanks."),
    )


def kept(dialect: str, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """What each dialect can carry. Anthropic sends arguments as an object, so they read
    back compact (key order kept; whitespace is not part of its key); OpenAI tool outputs
    have no error flag."""

    def block(b: Any) -> Any:
        if dialect == "anthropic" and isinstance(b, ToolUseBlock):
            compact = json.dumps(json.loads(b.input_json), separators=(",", ":"))
            return dataclasses.replace(b, input_json=compact)
        if dialect != "anthropic" and isinstance(b, ToolResultBlock):
            return dataclasses.replace(b, is_error=False)
        return b

    return tuple(
        dataclasses.replace(m, content=tuple(block(b) for b in m.content)) for m in messages
    )


def render(dialect: str, request: Request) -> dict[str, Any]:
    return dialect_module(dialect).render_request(request)  # type: ignore[no-any-return]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_request_round_trips_every_block_kind(dialect: str) -> None:
    request = Request(prefix=prefix(), messages=history(), max_tokens=1000)
    expected = dataclasses.replace(request, messages=kept(dialect, request.messages))
    marked = dataclasses.replace(request, breakpoints=(Breakpoint(), Breakpoint(message=2)))
    parse = dialect_module(dialect).parse_request
    # Markers are cache directives, not content: a marked body reads back the same.
    assert (parse(render(dialect, request)), parse(render(dialect, marked))) == (expected, expected)


CACHE_SETTINGS = {
    "prompt_cache_key": "session-a1b2",
    "prompt_cache_retention": "24h",
    "stream": True,
}


@pytest.mark.parametrize(
    ("dialect", "settings"),
    [
        (
            "openai_chat",
            {
                "tool_choice": {"type": "function", "function": {"name": "read_file"}},
                "parallel_tool_calls": False,
                "reasoning_effort": "high",
                "max_completion_tokens": 64,
                **CACHE_SETTINGS,
                "stream_options": {"include_usage": True},
            },
        ),
        (
            "openai_responses",
            {
                "tool_choice": {"type": "function", "name": "read_file"},
                "parallel_tool_calls": False,
                "reasoning": {"effort": "high"},
                "include": ["reasoning.encrypted_content"],
                "max_output_tokens": 64,
                **CACHE_SETTINGS,
            },
        ),
    ],
)
def test_openai_request_round_trips_cache_settings(dialect: str, settings: dict[str, Any]) -> None:
    request = Request(
        prefix=prefix(tool_choice="tool:read_file", parallel_tool_calls=False),
        messages=(user_text("hi"),),
        max_tokens=64,
        cache_key="session-a1b2",
        cache_retention="24h",
        stream=True,
    )
    body = render(dialect, request)
    sent = {k: v for k, v in body.items() if k not in ("model", "tools", "messages", "input")}
    assert (sent, dialect_module(dialect).parse_request(body)) == (settings, request)


@pytest.mark.parametrize(
    ("choice", "chat", "responses"),
    [
        ("auto", None, None),
        ("any", "required", "required"),
        ("none", "none", "none"),
        (
            "tool:read_file",
            {"type": "function", "function": {"name": "read_file"}},
            {"type": "function", "name": "read_file"},
        ),
    ],
)
def test_tool_choice_maps_both_ways(choice: str, chat: Any, responses: Any) -> None:
    request = Request(prefix=prefix(tool_choice=choice), messages=(user_text("hi"),))
    for dialect, wire in (("openai_chat", chat), ("openai_responses", responses)):
        body = render(dialect, request)
        assert body.get("tool_choice") == wire
        assert dialect_module(dialect).parse_request(body) == request


@pytest.mark.parametrize("dialect", OPENAI)
def test_tool_call_arguments_are_replayed_verbatim(dialect: str) -> None:
    body = render(dialect, Request(prefix=prefix(), messages=history()))
    if dialect == "openai_chat":
        sent = [
            c["function"]["arguments"] for m in body["messages"] for c in m.get("tool_calls", ())
        ]
    else:
        sent = [i["arguments"] for i in body["input"] if i.get("type") == "function_call"]
    assert sent == [ARGS, '{"path":"b.txt"}']


@pytest.mark.parametrize("dialect", DIALECTS)
def test_tools_keep_the_prefix_order_and_bytes(dialect: str) -> None:
    body = render(dialect, Request(prefix=prefix(), messages=(user_text("hi"),)))
    specs = []
    for tool in body["tools"]:
        fn = tool.get("function", tool)
        schema = tool["input_schema"] if dialect == "anthropic" else fn["parameters"]
        # Dumped without sorting: the rendered key order itself must be the canonical one.
        spec = {"description": fn["description"], "input_schema": schema, "name": fn["name"]}
        specs.append(json.dumps(spec, separators=(",", ":"), ensure_ascii=False).encode())
    assert specs == list(TOOLS)


def _markers(body: dict[str, Any]) -> int:
    text = json.dumps(body)
    return text.count('"prompt_cache_breakpoint"') + text.count('"cache_control"')


@pytest.mark.parametrize("dialect", DIALECTS)
def test_rendering_is_memoized_and_markers_never_leak(dialect: str) -> None:
    memo: dict[str, Any] = {}
    request = Request(prefix=prefix(), messages=history(), render_memo=memo)
    marked = dataclasses.replace(
        request,
        breakpoints=(Breakpoint(), Breakpoint(message=2, block=-1), Breakpoint(message=4)),
    )
    first = render(dialect, request)
    with_markers = render(dialect, marked)
    again = render(dialect, request)
    fresh = render(dialect, Request(prefix=prefix(), messages=history()))
    assert (_markers(first), _markers(with_markers), _markers(again)) == (0, 3, 0)
    assert first == again == fresh
    shared = dialect_module(dialect).render_request(request, shared=True)["tools"]
    # Tools are built once per prefix; what a provider gets is its own copy of them.
    assert dialect_module(dialect).render_request(request, shared=True)["tools"] is shared
    assert render(dialect, request)["tools"] is not shared
    assert all(dialect in m.wire_memo for m in request.messages)


def test_chat_body_is_what_the_sdk_would_send() -> None:
    messages = (
        user_text("Read a.txt."),
        AssistantMessage(
            content=(
                ThinkingBlock(thinking="Plan.", signature="enc-1"),
                ToolUseBlock(id="call_1", name="read_file", input_json=ARGS),
            )
        ),
        UserMessage(
            content=(ToolResultBlock(tool_use_id="call_1", content="gone", is_error=True),)
        ),
    )
    body = render("openai_chat", Request(prefix=prefix(effort=None), messages=messages))
    function = {"name": "read_file", "description": "Read a file.", "parameters": SCHEMA}
    assert body == {
        "model": "gpt-5.6",
        "tools": [
            {
                "type": "function",
                "function": {**function, "name": "list_files", "description": "List files."},
            },
            {"type": "function", "function": function},
        ],
        "messages": [
            {"role": "system", "content": "Be careful."},
            {"role": "user", "content": "Read a.txt."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": ARGS},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "gone"},
        ],
        "max_completion_tokens": 4096,
    }


def test_responses_body_is_what_the_sdk_would_send() -> None:
    messages = (
        user_text("Read a.txt."),
        AssistantMessage(
            content=(
                ThinkingBlock(thinking="Plan.", signature="enc-1"),
                TextBlock(text="Reading."),
                ToolUseBlock(id="call_1", name="read_file", input_json=ARGS),
            )
        ),
        UserMessage(
            content=(ToolResultBlock(tool_use_id="call_1", content="gone", is_error=True),)
        ),
        AssistantMessage(content=(ThinkingBlock(thinking="unsigned"), TextBlock(text="Gone."))),
    )
    body = render("openai_responses", Request(prefix=prefix(effort=None), messages=messages))
    tool = {
        "type": "function",
        "name": "read_file",
        "description": "Read a file.",
        "parameters": SCHEMA,
        "strict": False,
    }
    assert body == {
        "model": "gpt-5.6",
        "tools": [{**tool, "name": "list_files", "description": "List files."}, tool],
        "input": [
            {"role": "developer", "content": "Be careful."},
            {"role": "user", "content": "Read a.txt."},
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Plan."}],
                "encrypted_content": "enc-1",
            },
            {"role": "assistant", "content": "Reading."},
            {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": ARGS},
            {"type": "function_call_output", "call_id": "call_1", "output": "gone"},
            {"role": "assistant", "content": "Gone."},  # no signature: the reasoning is dropped
        ],
        "max_output_tokens": 4096,
    }


BREAKPOINTS = (
    Breakpoint(),
    Breakpoint(message=1, block=-1, ttl="1h"),  # a tool call: moves back to the last text
    Breakpoint(message=2, block=0),
)
SHORT = {"mode": "explicit"}
LONG = {"mode": "explicit", "ttl": "12h"}


def _marked_history() -> tuple[Message, ...]:
    return (
        user_text("Read a.txt."),
        AssistantMessage(
            content=(
                TextBlock(text="Reading."),
                TextBlock(text="Then summing."),
                ToolUseBlock(id="call_1", name="read_file", input_json=ARGS),
            )
        ),
        UserMessage(content=(ToolResultBlock(tool_use_id="call_1", content="alpha"),)),
    )


def test_chat_breakpoints_turn_the_marked_content_into_parts() -> None:
    request = Request(prefix=prefix(), messages=_marked_history(), breakpoints=BREAKPOINTS)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": ARGS},
    }
    assert render("openai_chat", request)["messages"] == [
        {
            "role": "system",
            "content": [{"type": "text", "text": "Be careful.", "prompt_cache_breakpoint": SHORT}],
        },
        {"role": "user", "content": "Read a.txt."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "text", "text": "Then summing.", "prompt_cache_breakpoint": LONG},
            ],
            "tool_calls": [call],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "alpha", "prompt_cache_breakpoint": SHORT}],
        },
    ]


def test_responses_breakpoints_mark_input_parts_only() -> None:
    request = Request(prefix=prefix(), messages=_marked_history(), breakpoints=BREAKPOINTS)
    assert render("openai_responses", request)["input"] == [
        {
            "role": "developer",
            "content": [
                {"type": "input_text", "text": "Be careful.", "prompt_cache_breakpoint": SHORT}
            ],
        },
        {"role": "user", "content": "Read a.txt."},
        {  # output text cannot carry a breakpoint
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Reading.", "annotations": []},
                {"type": "output_text", "text": "Then summing.", "annotations": []},
            ],
        },
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": ARGS},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": "alpha", "prompt_cache_breakpoint": SHORT}],
        },
    ]


def _response_message(stop: str = "tool_use") -> AssistantMessage:
    content: tuple[Any, ...] = (
        ThinkingBlock(thinking="Plan.", signature="sig-1"),
        TextBlock(text="Reading."),
    )
    if stop == "tool_use":
        content += (ToolUseBlock(id="call_9", name="read_file", input_json=ARGS),)
    return AssistantMessage(content=content, stop_reason=stop, id="resp_1")


@pytest.mark.parametrize("stop", ["tool_use", "end_turn", "max_tokens"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_response_round_trips(dialect: str, stop: str) -> None:
    module = dialect_module(dialect)
    message = _response_message(stop)
    expected = kept(dialect, (message,))[0]
    usage = USAGE
    if dialect == "openai_chat":  # no reasoning field, and a single write bucket
        expected = dataclasses.replace(expected, content=expected.content[1:])
        usage = dataclasses.replace(USAGE, written_5m=380, written_1h=0)
    assert module.parse_response(module.render_response(message, USAGE, "gpt-5.6")) == (
        expected,
        usage,
    )


SDK_MODELS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "anthropic": anthropic.types.Message.model_validate,
    "openai_chat": openai.types.chat.ChatCompletion.model_validate,
    "openai_responses": openai.types.responses.Response.model_validate,
}

# Where each SDK puts the token counts of USAGE, and what they must read there.
SDK_USAGE: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "anthropic": (
        (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ),
        (120, 380, 2000, 42),
    ),
    "openai_chat": (
        (
            "prompt_tokens",
            "prompt_tokens_details.cached_tokens",
            "prompt_tokens_details.cache_write_tokens",
            "completion_tokens",
            "total_tokens",
        ),
        (2500, 2000, 380, 42, 2542),
    ),
    "openai_responses": (
        (
            "input_tokens",
            "input_tokens_details.cached_tokens",
            "input_tokens_details.cache_write_tokens",
            "input_tokens_details.cache_write_tokens_details.ttl_30m_tokens",
            "input_tokens_details.cache_write_tokens_details.ttl_12h_tokens",
            "output_tokens",
            "total_tokens",
        ),
        (2500, 2000, 380, 300, 80, 42, 2542),
    ),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_official_sdk_parses_rendered_responses(dialect: str) -> None:
    body = dialect_module(dialect).render_response(_response_message(), USAGE, "gpt-5.6")
    sdk = SDK_MODELS[dialect](body)
    # Every field we sent was understood and kept: nothing dropped, nothing coerced.
    assert sdk.model_dump(mode="json", exclude_unset=True) == body
    fields, counts = SDK_USAGE[dialect]
    assert attrgetter(*fields)(sdk.usage) == counts
    if dialect == "anthropic":
        assert json.dumps(sdk.content[-1].input) == '{"b": 1, "a": 2}'
    elif dialect == "openai_chat":
        assert sdk.choices[0].message.tool_calls[0].function.arguments == ARGS
    else:
        assert (sdk.output[-1].arguments, sdk.output_text) == (ARGS, "Reading.")


def _completion(usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": "ok"}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [choice],
        "usage": usage,
        **extra,
    }


TOTALS = {"prompt_tokens": 2500, "completion_tokens": 42, "total_tokens": 2542}


@pytest.mark.parametrize(
    ("body", "usage"),
    [
        pytest.param(
            _completion(
                {
                    **TOTALS,
                    "prompt_tokens_details": {"cached_tokens": 2000, "cache_write_tokens": 380},
                }
            ),
            Usage(uncached=120, written_5m=380, read=2000, output=42),
            id="gpt-5.6",
        ),
        pytest.param(
            _completion(
                {**TOTALS, "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}}
            ),
            Usage(uncached=580, read=1920, output=42),
            id="gpt-4.1-or-sglang",
        ),
        pytest.param(_completion(TOTALS), Usage(uncached=2500, output=42), id="vllm-no-details"),
        pytest.param(
            _completion({**TOTALS, "prompt_tokens_details": None}),
            Usage(uncached=2500, output=42),
            id="null-details",
        ),
        pytest.param(
            _completion(
                {**TOTALS, "prompt_cache_hit_tokens": 2048, "prompt_cache_miss_tokens": 452}
            ),
            Usage(uncached=452, read=2048, output=42),
            id="deepseek",
        ),
        pytest.param(
            _completion(TOTALS, timings={"cache_n": 2400, "prompt_n": 100}),
            Usage(uncached=100, read=2400, output=42),
            id="llama.cpp-timings",
        ),
    ],
)
def test_chat_usage_is_normalized_into_disjoint_buckets(body: dict[str, Any], usage: Usage) -> None:
    from stoker.wire.dialects import openai_chat

    message, parsed = openai_chat.parse_response(body)
    assert (message, parsed) == (
        AssistantMessage(content=(TextBlock(text="ok"),), id="chatcmpl-1"),
        usage,
    )


@pytest.mark.parametrize(
    ("details", "usage"),
    [
        pytest.param(
            {
                "cached_tokens": 2000,
                "cache_write_tokens": 380,
                "cache_write_tokens_details": {"ttl_30m_tokens": 300, "ttl_12h_tokens": 80},
            },
            Usage(uncached=120, written_5m=300, written_1h=80, read=2000, output=42),
            id="gpt-5.6",
        ),
        pytest.param(
            {"cached_tokens": 2000, "cache_write_tokens": 380},
            Usage(uncached=120, written_5m=380, read=2000, output=42),
            id="no-ttl-split",
        ),
        pytest.param(
            {"cached_tokens": 1920}, Usage(uncached=580, read=1920, output=42), id="gpt-4.1"
        ),
        pytest.param(None, Usage(uncached=2500, output=42), id="no-details"),
    ],
)
def test_responses_usage_is_normalized_into_disjoint_buckets(details: Any, usage: Usage) -> None:
    from stoker.wire.dialects import openai_responses

    data = {
        "input_tokens": 2500,
        "output_tokens": 42,
        "total_tokens": 2542,
        "input_tokens_details": details,
    }
    assert openai_responses.parse_response({"id": "resp_1", "output": [], "usage": data}) == (
        AssistantMessage(content=(), id="resp_1"),
        usage,
    )


def test_chat_reads_local_server_reasoning_and_truncation() -> None:
    from stoker.wire.dialects import openai_chat

    message = {"role": "assistant", "content": "Partial", "reasoning_content": "Think."}
    choice = {"index": 0, "message": message, "finish_reason": "length"}
    body = {"id": "chatcmpl-2", "choices": [choice], "usage": TOTALS}
    assert openai_chat.parse_response(body) == (
        AssistantMessage(
            content=(ThinkingBlock(thinking="Think."), TextBlock(text="Partial")),
            stop_reason="max_tokens",
            id="chatcmpl-2",
        ),
        Usage(uncached=2500, output=42),
    )


def test_chat_parse_request_accepts_common_client_shapes() -> None:
    from stoker.wire.dialects import openai_chat

    body = {
        "model": "gpt-4.1",
        "max_tokens": 50,
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "Hello", "tool_calls": None},
            {"role": "user", "content": "bye"},
        ],
    }
    assert openai_chat.parse_request(body) == Request(
        prefix=Prefix(params=CacheParams(model="gpt-4.1"), system="Be terse."),
        messages=(
            user_text("hi"),
            AssistantMessage(content=(TextBlock(text="Hello"),)),
            user_text("bye"),
        ),
        max_tokens=50,
    )


def test_responses_parse_request_accepts_common_client_shapes() -> None:
    from stoker.wire.dialects import openai_responses

    plain = {"model": "gpt-5", "instructions": "Be terse.", "input": "hi"}
    assert openai_responses.parse_request(plain) == Request(
        prefix=Prefix(params=CacheParams(model="gpt-5"), system="Be terse."),
        messages=(user_text("hi"),),
        max_tokens=0,
    )
    items = {
        "model": "gpt-5",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
            },
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "read_file",
                "arguments": ARGS,
                "id": "fc_1",
            },
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "ok"}],
            },
        ],
    }
    assert openai_responses.parse_request(items).messages == (
        user_text("hi"),
        AssistantMessage(
            content=(
                TextBlock(text="Reading."),
                ToolUseBlock(id="c1", name="read_file", input_json=ARGS),
            )
        ),
        UserMessage(content=(ToolResultBlock(tool_use_id="c1", content="ok"),)),
    )


_REFERENCES = {
    "anthropic": (
        ImageRefBlock(url="https://example.com/a.png"),
        DocumentBlock(media_type="application/pdf", data="JVBERi0=", name="a.pdf"),
        DocumentBlock(media_type="text/plain", data="The grass is green."),
        DocumentBlock(url="https://example.com/b.pdf"),
        DocumentBlock(file_id="file_011"),
    ),
    "openai_chat": (
        ImageRefBlock(url="https://example.com/a.png", detail="low"),
        DocumentBlock(media_type="application/pdf", data="JVBERi0=", name="a.pdf"),
        DocumentBlock(file_id="file-abc"),
    ),
    "openai_responses": (
        ImageRefBlock(url="https://example.com/a.png", detail="high"),
        ImageRefBlock(file_id="file-img", detail="auto"),
        DocumentBlock(media_type="application/pdf", data="JVBERi0=", name="a.pdf"),
        DocumentBlock(url="https://example.com/b.pdf"),
        DocumentBlock(file_id="file-abc"),
    ),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_images_by_reference_and_documents_read_back_as_sent(dialect: str) -> None:
    """A URL image, a PDF, a text document, a file id: rendered in the API's own shape,
    parsed back to the same blocks (the simulator and the proxy read them so)."""
    blocks = (*_REFERENCES[dialect], TextBlock(text="Compare them."))
    prefix = Prefix(params=CacheParams(model="gpt-5" if dialect in OPENAI else "claude-sonnet-4-6"))
    request = Request(prefix=prefix, messages=(UserMessage(content=blocks),))
    module = dialect_module(dialect)
    parsed = module.parse_request(module.render_request(request))
    assert parsed.messages == request.messages


@pytest.mark.parametrize("dialect", OPENAI)
def test_an_image_url_that_is_neither_http_nor_data_is_refused(dialect: str) -> None:
    part = (
        {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}
        if dialect == "openai_chat"
        else {"type": "input_image", "image_url": "file:///etc/passwd", "detail": "auto"}
    )
    key = "messages" if dialect == "openai_chat" else "input"
    body = {"model": "gpt-5", key: [{"role": "user", "content": [part]}]}
    with pytest.raises(WireError, match="http"):
        dialect_module(dialect).parse_request(body)


# -- hostile answers: whatever a provider sends, a parser returns typed values or a WireError

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_ANSWER = AssistantMessage(
    content=(
        ThinkingBlock(thinking="Let me see.", signature="sig"),
        TextBlock(text="Reading it now."),
        ToolUseBlock(id="call_1", name="read_file", input_json='{"path": "a.md"}'),
    ),
    stop_reason="tool_use",
    id="resp_1",
)


@pytest.mark.parametrize(
    ("dialect", "body"),
    [
        ("anthropic", {"id": "x", "result": "hi"}),  # read as an empty answer before
        ("anthropic", {"content": [{"type": "text", "text": 5}]}),  # stored a number as text
        ("openai_chat", {"choices": []}),
        ("openai_chat", [{"choices": [{"message": {"content": "hi"}}]}]),
        ("openai_responses", {"output": [{"type": "message", "content": None}]}),
        ("openai_responses", {"output": [], "usage": {"input_tokens": "12"}}),
    ],
)
def test_a_body_that_is_not_an_answer_is_a_wire_error(dialect: str, body: Any) -> None:
    with pytest.raises(WireError, match="malformed"):
        dialect_module(dialect).parse_response(body)


def test_a_streamed_chunk_of_the_wrong_shape_is_a_wire_error() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [None]}}]}  # found by hypothesis
    with pytest.raises(WireError, match="malformed stream chunk"):
        openai_chat_stream.Accumulator().feed_frame(json.dumps(chunk))


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, the value itself first."""
    inner: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        inner = [p for k, v in value.items() for p in _paths(v, (*at, k))]
    elif isinstance(value, list):
        inner = [p for i, v in enumerate(value) for p in _paths(v, (*at, i))]
    return [at, *inner]


def _mutated(value: Any, data: st.DataObject) -> Any:
    """`value` with one place (maybe the whole) replaced by arbitrary JSON, or removed."""
    path = data.draw(st.sampled_from(_paths(value)))
    new = data.draw(_JSON)
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return copy


_STREAMED: dict[str, Any] = {
    "anthropic": (anthropic_stream.Accumulator, anthropic_stream.events),
    "openai_chat": (openai_chat_stream.Accumulator, openai_chat_stream.chunks),
    "openai_responses": (openai_responses_stream.Accumulator, openai_responses_stream.events),
}


def _folded(dialect: str, body: dict[str, Any], data: st.DataObject) -> Any:
    """The body an accumulator folds from `body`'s stream with one event mutated."""
    accumulator, events_of = _STREAMED[dialect]
    events = list(events_of(body))
    index = data.draw(st.integers(min_value=0, max_value=len(events) - 1))
    events[index] = _mutated(events[index], data)
    frames = [json.dumps(e) for e in events] + (["[DONE]"] if dialect == "openai_chat" else [])
    reader = accumulator()
    for frame in frames:
        text = reader.feed_frame(frame)
        assert text is None or isinstance(text, str)
    return reader.body()


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(dialect=st.sampled_from(DIALECTS), streamed=st.booleans(), data=st.data())
def test_any_answer_parses_to_typed_values_or_is_a_wire_error(
    dialect: str, streamed: bool, data: st.DataObject
) -> None:
    """A body with one place replaced by arbitrary JSON (or a stream with one such event)."""
    module = dialect_module(dialect)
    body = module.render_response(_ANSWER, USAGE, "gpt-5.6")
    try:
        body = _folded(dialect, body, data) if streamed else _mutated(body, data)
        message, usage = module.parse_response(body)
    except (WireError, ProviderError):  # ProviderError: the event became an `error` event
        return
    assert isinstance(message.text, str)
    assert all(isinstance(v, int) for v in usage.to_dict().values())
    json.dumps([dataclasses.asdict(b) for b in message.content])
