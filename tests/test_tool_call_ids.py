"""A tool call a server sent without an id gets one derived from the response.

Local and hosted open-weight servers sometimes omit `id` / `call_id`, or send null or
"". A stand-in for such a server answers "go" with four parallel calls (no id, null,
"", and one it did name; the first two identical in name and arguments) on both
OpenAI APIs, streamed and not, through the official SDK. Each call must get its own
id, always the same one for the same response, its result must answer it, and every
later request (in this process and after a resume from the SQLite file) must send the
ids back byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from stoker.agent.agent import Agent
from stoker.agent.seams import Callbacks
from stoker.clock import FrozenClock
from stoker.providers.openai import QUIRKS, Api, OpenAIProvider
from stoker.providers.sim.server import ServedSim, serve_in_background
from stoker.store.sqlite import SQLiteStore
from stoker.wire.blocks import ToolUseBlock
from stoker.wire.dialects import (
    openai_chat,
    openai_chat_stream,
    openai_responses,
    openai_responses_stream,
)
from stoker.wire.messages import AssistantMessage
from tests.helpers import make_registry

GIVEN = "call_given7"
# (the id as the server sends it, the arguments): `...` is a missing key.
CALLS: list[tuple[Any, str]] = [
    (..., '{"text": "a"}'),
    (None, '{"text": "a"}'),
    ("", '{"text": "b"}'),
    (GIVEN, '{"text": "c"}'),
]
USAGE_CHAT = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
USAGE_RESPONSES = {"input_tokens": 300, "output_tokens": 20, "total_tokens": 320}


def _chat_body(answer: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "done" if answer else None}
    if not answer:
        message["tool_calls"] = []
        for sent_id, args in CALLS:
            call = {"type": "function", "function": {"name": "read_file", "arguments": args}}
            message["tool_calls"].append(call if sent_id is ... else {"id": sent_id, **call})
    finish = "stop" if answer else "tool_calls"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    head = {"id": "chatcmpl-local", "object": "chat.completion", "created": 1, "model": "local"}
    return {**head, "choices": [choice], "usage": USAGE_CHAT}


def _responses_body(answer: bool) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if answer:
        text = {"type": "output_text", "text": "done", "annotations": []}
        output.append({"type": "message", "role": "assistant", "content": [text]})
    else:
        for sent_id, args in CALLS:
            item = {"type": "function_call", "name": "read_file", "arguments": args}
            output.append(item if sent_id is ... else {"call_id": sent_id, **item})
    head = {"id": "resp-local", "object": "response", "created_at": 1, "model": "local"}
    return {**head, "status": "completed", "output": output, "usage": USAGE_RESPONSES}


def _answers(payload: dict[str, Any]) -> bool:
    """Whether the request ends with tool results or a later user text (not "go")."""
    content = _history(payload)[-1].get("content")
    if isinstance(content, list):  # a breakpoint turns a message into parts
        content = "".join(part.get("text", "") for part in content)
    return content != "go"


class Upstream:
    """An OpenAI-compatible server that omits tool-call ids; keeps what it received."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        def route(path: str, build: Any, frames: Any) -> Route:
            async def answer(request: HttpRequest) -> Response:
                payload = await request.json()
                self.received.append(payload)
                body = build(_answers(payload))
                if payload.get("stream"):
                    return StreamingResponse(frames(body), media_type="text/event-stream")
                return JSONResponse(body)

            return Route(path, answer, methods=["POST"])

        chat = route("/v1/chat/completions", _chat_body, openai_chat_stream.frames)
        responses = route("/v1/responses", _responses_body, openai_responses_stream.frames)
        return Starlette(routes=[chat, responses])


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[ServedSim, Upstream]]:
    fake = Upstream()
    with serve_in_background(fake.app()) as served:
        yield served, fake


def _agent(served: ServedSim, api: Api) -> Agent:
    provider = OpenAIProvider(
        api_key="EMPTY", api=api, base_url=served.openai_url, quirks=QUIRKS["generic"]
    )
    clock = FrozenClock()
    return Agent(
        "local", provider=provider, registry=make_registry(), system="Be brief.", clock=clock
    )


def _calls_sent(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """(id, arguments) of every tool call the request replays, in order."""
    if "messages" in payload:
        return [
            (c["id"], c["function"]["arguments"])
            for m in payload["messages"]
            for c in m.get("tool_calls") or ()
        ]
    return [
        (i["call_id"], i["arguments"]) for i in payload["input"] if i.get("type") == "function_call"
    ]


def _results_sent(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, output) of every tool result the request replays, in order."""
    if "messages" in payload:
        return [
            (m["tool_call_id"], m["content"]) for m in payload["messages"] if m["role"] == "tool"
        ]
    return [
        (i["call_id"], i["output"])
        for i in payload["input"]
        if i.get("type") == "function_call_output"
    ]


def _history(payload: dict[str, Any]) -> list[Any]:
    return payload["messages"] if "messages" in payload else payload["input"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_calls_without_ids_get_distinct_ids_replayed_byte_for_byte(
    upstream: tuple[ServedSim, Upstream], tmp_path: Path, api: Api, stream: bool
) -> None:
    served, fake = upstream
    callbacks = Callbacks(on_text=lambda _: None) if stream else None
    start = len(fake.received)
    async with _agent(served, api) as agent, SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, None)
        assert (await session.send("go", callbacks=callbacks)).text == "done"
        assert (await session.send("thanks", callbacks=callbacks)).text == "done"
    after_results, next_turn = fake.received[start + 1], fake.received[start + 2]
    assert all(p.get("stream", False) is stream for p in fake.received[start:])

    calls = _calls_sent(after_results)
    ids = [i for i, _ in calls]
    assert [a for _, a in calls] == [args for _, args in CALLS]
    assert all(i.startswith("call_") and len(i) > len("call_") for i in ids)
    assert len(set(ids)) == len(ids)  # the two identical calls too
    assert ids[3] == GIVEN  # an id the server sent is kept as given
    # Each result answers its own call, in the order of the calls.
    expected = [(i, f"read_file ok: {json.loads(a)['text']}") for i, a in calls]
    assert _results_sent(after_results) == expected
    # The next turn sends the same bytes again.
    sent = _history(after_results)
    assert json.dumps(_history(next_turn)[: len(sent)]) == json.dumps(sent)

    # A resume from the file (a new store object) holds those ids and replays them.
    async with _agent(served, api) as agent, SQLiteStore(tmp_path / "s.db") as store:
        resumed = await agent.open(store, session.id, create=False)
        stored = next(m for m in resumed.history if isinstance(m, AssistantMessage))
        assert [c.id for c in stored.tool_calls] == ids
        assert (await resumed.send("still there?", callbacks=callbacks)).text == "done"
    sent = _history(next_turn)
    assert json.dumps(_history(fake.received[-1])[: len(sent)]) == json.dumps(sent)

    # The same response always reads back with the same ids: another session agrees.
    async with _agent(served, api) as agent:
        await agent.session().send("go", callbacks=callbacks)
    assert _calls_sent(fake.received[-1]) == calls


PARSERS = {
    "chat": (openai_chat.parse_response, _chat_body),
    "responses": (openai_responses.parse_response, _responses_body),
}


@pytest.mark.parametrize("api", sorted(PARSERS))
def test_filled_ids_come_from_the_response(api: str) -> None:
    parse, build = PARSERS[api]
    body = build(False)
    first = parse(body)[0].tool_calls
    assert parse(json.loads(json.dumps(body)))[0].tool_calls == first  # never random
    other = parse({**body, "id": "another-response"})[0].tool_calls
    assert all(a.id != b.id for a, b in zip(other[:3], first[:3], strict=True))  # other turn
    assert other[3].id == first[3].id == GIVEN


# -- property: any mix of missing and given ids ----------------------------------------

missing = st.sampled_from([..., None, ""])
call_specs = st.lists(
    st.tuples(
        st.one_of(missing, st.just("given")),
        st.sampled_from(["read_file", "list_files"]),
        st.sampled_from(["{}", '{"text": "a"}', '{ "text" : "a" }']),
    ),
    max_size=6,
)


def _chat_of(specs: list[tuple[Any, str, str]], response_id: str) -> dict[str, Any]:
    calls = []
    for n, (sent_id, name, args) in enumerate(specs):
        call = {"type": "function", "function": {"name": name, "arguments": args}}
        if sent_id is not ...:
            call["id"] = f"call_given{n}" if sent_id == "given" else sent_id
        calls.append(call)
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return {"id": response_id, "choices": [{"index": 0, "message": message}], "usage": {}}


def _responses_of(specs: list[tuple[Any, str, str]], response_id: str) -> dict[str, Any]:
    output = []
    for n, (sent_id, name, args) in enumerate(specs):
        item = {"type": "function_call", "name": name, "arguments": args}
        if sent_id is not ...:
            item["call_id"] = f"call_given{n}" if sent_id == "given" else sent_id
        output.append(item)
    return {"id": response_id, "output": output, "usage": {}}


def _streamed_chat(body: dict[str, Any]) -> dict[str, Any]:
    accumulator = openai_chat_stream.Accumulator()
    for chunk in openai_chat_stream.chunks(body):
        accumulator.feed(chunk)
    return accumulator.body()


def _streamed_responses(body: dict[str, Any]) -> dict[str, Any]:
    accumulator = openai_responses_stream.Accumulator()
    for event in openai_responses_stream.events(body):
        accumulator.feed(event)
    return accumulator.body()


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(specs=call_specs, response_id=st.sampled_from(["", "r1", "chatcmpl-x"]))
def test_every_call_has_an_id_unique_in_its_response_and_the_same_each_read(
    specs: list[tuple[Any, str, str]], response_id: str
) -> None:
    for parse, build, stream in (
        (openai_chat.parse_response, _chat_of, _streamed_chat),
        (openai_responses.parse_response, _responses_of, _streamed_responses),
    ):
        body = build(specs, response_id)
        for received in (body, stream(body)):
            calls: tuple[ToolUseBlock, ...] = parse(received)[0].tool_calls
            ids = [c.id for c in calls]
            assert all(isinstance(i, str) and i for i in ids)
            assert len(set(ids)) == len(ids)
            for n, (sent_id, _, _) in enumerate(specs):
                if sent_id == "given":
                    assert ids[n] == f"call_given{n}"
            assert parse(json.loads(json.dumps(received)))[0].tool_calls == calls


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["read_file", "list_files", "run_shell"]),
            st.text(alphabet='{}":ab, 1', min_size=1, max_size=12),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    pieces=st.integers(1, 3),
)
def test_streamed_calls_without_an_index_stay_apart(
    calls: list[tuple[str, str, bool]], pieces: int
) -> None:
    """A server that leaves `index` out of its tool-call deltas still gets one call per
    call: a delta naming a new call starts it, the argument pieces after it continue it."""
    acc = openai_chat_stream.Accumulator()
    for n, (name, arguments, with_id) in enumerate(calls):
        head: dict[str, object] = {"type": "function", "function": {"name": name}}
        if with_id:
            head["id"] = f"call_{n}"
        acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
        size = max(1, len(arguments) // pieces)
        for i in range(0, len(arguments), size):
            piece = {"function": {"arguments": arguments[i : i + size]}}
            acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
    message = acc.body()["choices"][0]["message"]
    sent = [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
    assert sent == [(name, arguments) for name, arguments, _ in calls]
