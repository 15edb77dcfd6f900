"""No body makes the simulator answer a 5xx or drop the connection, on any of its APIs.

For each wire a hypothesis strategy starts from a rich, valid request (tools, a tool
loop, images by URL and inline, documents, structured output, stop sequences, limits)
and breaks it the ways a client does: a field anywhere replaced by a value of another
type, a huge number, deep nesting, a lone surrogate; a field removed; the body not JSON.
Every answer must be a 2xx or a 4xx in the API's own JSON error shape, and a streamed
2xx must stream to its end. The bounded run is in `make test`; the examples found are
kept below as regressions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from starlette.testclient import TestClient

from stoker.clock import FrozenClock
from stoker.providers.sim.server import create_app
from tests.hostile_http import encode
from tests.sim_bodies import broken

IMAGE = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PNG, TXT = "image/png", "text/plain"
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "lines": {"type": "integer", "minimum": 1}},
    "required": ["path", "lines"],
    "additionalProperties": False,
}
ANTHROPIC = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 2048,
    "system": [{"type": "text", "text": "You read files.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "read_file", "description": "Read a file.", "input_schema": SCHEMA}],
    "tool_choice": {"type": "auto"},
    "stop_sequences": ["END"],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "read_file app.py"},
                {"type": "image", "source": {"type": "url", "url": "https://x.invalid/a.png"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": IMAGE},
                },
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "hi"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Reading.", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}],
        },
    ],
    "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    "stream": False,
}
CHAT = {
    "model": "gpt-4.1",
    "max_completion_tokens": 64,
    "n": 2,
    "stop": ["END"],
    "logprobs": True,
    "top_logprobs": 2,
    "tools": [{"type": "function", "function": {"name": "read_file", "parameters": SCHEMA}}],
    "tool_choice": "auto",
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "file", "schema": SCHEMA, "strict": True},
    },
    "messages": [
        {"role": "system", "content": "You read files."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "read_file app.py"},
                {"type": "image_url", "image_url": {"url": "https://x.invalid/a.png"}},
                {"type": "file", "file": {"file_id": "file-1"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        {"role": "developer", "content": "Be brief."},
    ],
    "stream": False,
    "prompt_cache_key": "k",
}
RESPONSES = {
    "model": "gpt-5.6",
    "instructions": "You read files.",
    "max_output_tokens": 64,
    "reasoning": {"effort": "low", "summary": "auto"},
    "include": ["reasoning.encrypted_content"],
    "store": True,
    "tools": [{"type": "function", "name": "read_file", "parameters": SCHEMA, "strict": True}],
    "tool_choice": {"type": "function", "name": "read_file"},
    "text": {"format": {"type": "json_schema", "name": "file", "schema": SCHEMA}},
    "input": [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "read_file app.py"},
                {"type": "input_image", "image_url": "https://x.invalid/a.png", "detail": "low"},
                {"type": "input_file", "file_url": "https://x.invalid/a.pdf"},
            ],
        },
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "print(1)"},
        {"type": "item_reference", "id": "msg_missing"},
    ],
    "prompt_cache_options": {"mode": "explicit", "ttl": "30m"},
    "stream": False,
}
RESULT_AS_OBJECT = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "messages": [
        {"role": "user", "content": "read_file app.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": {"a": {"b": 1}}}],
        },
    ],
}
WIRES = {
    "/v1/messages": ANTHROPIC,
    "/v1/messages/count_tokens": {k: v for k, v in ANTHROPIC.items() if k != "max_tokens"},
    "/v1/chat/completions": CHAT,
    "/v1/responses": RESPONSES,
    "/v1/responses/input_tokens": RESPONSES,
}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(clock=FrozenClock()), raise_server_exceptions=True) as c:
        yield c


def _check(client: TestClient, path: str, content: bytes) -> None:
    headers = {
        "x-api-key": f"sk-{uuid.uuid4().hex}",
        "authorization": f"Bearer sk-{uuid.uuid4().hex}",
        "content-type": "application/json",
    }
    with client.stream("POST", path, content=content, headers=headers) as answer:
        body = answer.read()  # a stream is read to its end: nothing may break it off
    assert answer.status_code < 500, body[:500]
    if answer.status_code >= 400:
        error = json.loads(body)
        message = error["error"]["message"]
        assert isinstance(message, str)
        assert message


@pytest.mark.parametrize("path", list(WIRES))
def test_no_body_makes_the_simulator_fail(client: TestClient, path: str) -> None:
    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(content=broken(WIRES[path]))
    @example(content=encode({**WIRES[path], "messages": []}))
    @example(content=encode({**WIRES[path], "input": []}))
    @example(content=encode({"model": "gpt-4.1", "messages": [{"role": "system", "content": "x"}]}))
    @example(content=encode({"model": "gpt-4.1", "input": [], "instructions": "x"}))
    @example(content=encode(RESULT_AS_OBJECT))  # was a 500: the sim model sliced a dict
    def one(content: bytes) -> None:
        _check(client, path, content)

    one()


def test_the_valid_bodies_are_answered(client: TestClient) -> None:
    """The starting points are good requests (else the fuzzing above proves little)."""
    for path, good in WIRES.items():
        if path == "/v1/responses" or path == "/v1/responses/input_tokens":
            good = {**good, "input": good["input"][:-3]}  # no dangling call or reference
        if path == "/v1/chat/completions":
            good = {**good, "messages": good["messages"][:2]}
        if path == "/v1/messages":
            good = {**good, "messages": good["messages"][:1]}
        with client.stream(
            "POST", path, json=good, headers={"x-api-key": "k", "authorization": "Bearer k"}
        ) as answer:
            text = answer.read()
        assert answer.status_code == 200, (path, text[:300])
