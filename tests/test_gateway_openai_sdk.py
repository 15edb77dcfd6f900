"""Real OpenAI clients against a gateway on loopback: the official `openai` SDK (sync,
async, streaming, Chat Completions and Responses) and the openai-agents framework
(pinned in the dev extras). They see cached tokens in usage, OpenAI's exceptions with
OpenAI's codes, client tools refused, and a resent history continuing one session; and,
with the SDK's strict validation, models, chunks and stream events of its own types, and
a request id on every response."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai.types import Model
from openai.types.responses import ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

from stoker.errors import ProviderError
from stoker.gateway.app import create_app
from stoker.gateway.openai_compat import MODEL_CREATED
from stoker.gateway.server import serve_in_thread
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.wire.blocks import ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request
from tests.images import png
from tests.test_gateway_support import TOKENS, Rig, make_rig, tokens

KEY = TOKENS["alice"]


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return make_rig(SQLiteStore(tmp_path / "sessions.db"))


@pytest.fixture
def url(rig: Rig) -> Iterator[str]:
    """The base URL of a gateway on the simulator, served on a free loopback port."""
    with serve_in_thread(create_app(rig.gateway, tokens=tokens())) as base:
        yield base


def sessions(url: str) -> list[str]:
    r = httpx.get(url + "/v1/sessions", headers={"Authorization": f"Bearer {KEY}"})
    return [s["id"] for s in r.json()["sessions"]]


def turns(url: str, sid: str) -> list[str]:
    r = httpx.get(f"{url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {KEY}"})
    return [t["user"] for t in r.json()["turns"]]


class _Gated(ProviderWrapper):
    """The simulator, answering only once `gate` is set (from the test's thread)."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.gate = threading.Event()

    async def complete(self, request: Request, context: CallContext) -> Completion:
        await asyncio.to_thread(self.gate.wait, 10.0)
        return await self.inner.complete(request, context)


def test_a_client_that_hangs_up_mid_stream_still_continues_its_session(rig: Rig) -> None:
    gated = rig.provider = _Gated(rig.sim)
    headers = {"Authorization": f"Bearer {KEY}"}
    with serve_in_thread(create_app(rig.gateway, tokens=tokens())) as base:
        body = {"messages": [_user("first")], "stream": True}
        with httpx.stream("POST", base + "/v1/chat/completions", json=body, headers=headers) as r:
            sid = r.headers["x-stoker-session"]
            next(r.iter_lines())  # the first chunk; then the client is gone
        gated.gate.set()  # the turn goes on without it
        deadline = time.monotonic() + 10
        while turns(base, sid) != ["first"] and time.monotonic() < deadline:
            time.sleep(0.02)
        resent = [_user("first"), {"role": "assistant", "content": "Understood: first"}]
        r = httpx.post(
            base + "/v1/chat/completions",
            json={"messages": [*resent, _user("second")]},
            headers=headers,
        )
        assert r.headers["x-stoker-session"] == sid
        assert turns(base, sid) == ["first", "second"]


def test_the_sync_client_continues_one_session_and_reads_the_cache(url: str) -> None:
    with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        messages: list[Any] = [{"role": "system", "content": "You help."}]
        usages, sids = [], set()
        for text in ("first", "second"):
            messages.append({"role": "user", "content": text})
            raw = client.chat.completions.with_raw_response.create(
                model="stoker", messages=messages
            )
            completion = raw.parse()
            sids.add(raw.headers["x-stoker-session"])
            usages.append(completion.usage)
            messages.append({"role": "assistant", "content": completion.choices[0].message.content})
    assert sessions(url) == list(sids)
    assert turns(url, sids.pop()) == ["first", "second"]
    first, second = usages
    assert first is not None
    assert second is not None
    assert first.prompt_tokens_details is not None
    assert second.prompt_tokens_details is not None
    assert first.prompt_tokens_details.cached_tokens == 0
    assert first.prompt_tokens_details.cache_write_tokens == first.prompt_tokens
    assert second.prompt_tokens_details.cached_tokens == first.prompt_tokens  # all of it
    extension = (second.model_extra or {})["x_stoker"]
    assert extension["cache_read_tokens"] == second.prompt_tokens_details.cached_tokens
    assert extension["cache_write_5m_tokens"] == second.prompt_tokens_details.cache_write_tokens


async def test_the_async_client_streams_with_cached_tokens_in_the_last_chunk(url: str) -> None:
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        messages: list[Any] = [{"role": "user", "content": "first"}]
        for text in ("first", "second"):
            stream = await client.chat.completions.create(
                model="stoker",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
            answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert answer == f"Understood: {text}"
            messages += [
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "second"},
            ]
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens
    assert [turns(url, sid) for sid in sessions(url)] == [["first", "second"]]


def test_the_responses_api_plain_streamed_and_by_previous_response_id(url: str) -> None:
    with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        first = client.responses.create(model="stoker", input="first", instructions="ignored")
        assert first.output_text == "Understood: first"
        second = client.responses.create(input="second", previous_response_id=first.id, model="x")
        assert second.usage is not None
        assert second.usage.input_tokens_details.cached_tokens > 0
        history: list[Any] = [
            {"role": "user", "content": "first"},
            *[item.model_dump() for item in first.output],
            {"role": "user", "content": "second"},
            *[item.model_dump() for item in second.output],
            {"role": "user", "content": "third"},
        ]
        with client.responses.stream(model="stoker", input=history) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Understood: third"
    assert final.usage is not None
    assert final.usage.input_tokens_details.cached_tokens > 0
    assert [turns(url, sid) for sid in sessions(url)] == [["first", "second", "third"]]


async def test_errors_raise_openais_exceptions_with_openais_codes(url: str) -> None:
    user: list[Any] = [{"role": "user", "content": "hi"}]
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as auth_error:
            await bad.chat.completions.create(model="stoker", messages=user)
    assert auth_error.value.code == "invalid_api_key"
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        tool: Any = {"type": "function", "function": {"name": "f", "parameters": {}}}
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="stoker", messages=user, tools=[tool], stream=True
            )
        assert (refused.value.param, refused.value.code) == ("tools", "client_tools_unsupported")
        with pytest.raises(openai.NotFoundError) as missing:
            await client.responses.create(
                model="stoker", input="hi", extra_headers={"X-Stoker-Session": "x" * 32}
            )
        assert missing.value.code == "not_found"
        with pytest.raises(openai.BadRequestError) as unknown:
            await client.responses.create(model="stoker", input="hi", previous_response_id="r")
        assert unknown.value.param == "previous_response_id"
    assert sessions(url) == []


@function_tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query


@pytest.mark.parametrize("kind", [OpenAIChatCompletionsModel, OpenAIResponsesModel])
async def test_an_openai_agents_conversation_is_one_session_and_its_tools_are_refused(
    url: str, kind: type[OpenAIChatCompletionsModel] | type[OpenAIResponsesModel]
) -> None:
    set_tracing_disabled(True)  # nothing leaves the machine
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        model = kind(model="stoker", openai_client=client)
        agent = Agent(name="helper", instructions="You help.", model=model)
        first = await Runner.run(agent, "first")
        assert first.final_output == "Understood: first"
        second = await Runner.run(agent, [*first.to_input_list(), _user("second")])
        assert second.final_output == "Understood: second"
        assert second.context_wrapper.usage.input_tokens_details.cached_tokens > 0
        streamed = Runner.run_streamed(agent, [*second.to_input_list(), _user("third")])
        _ = [event async for event in streamed.stream_events()]
        assert streamed.final_output == "Understood: third"
        with_tools = Agent(name="tools", tools=[lookup], model=model)
        with pytest.raises(openai.BadRequestError) as refused:
            await Runner.run(with_tools, "look it up")
        assert refused.value.code == "client_tools_unsupported"
    assert [turns(url, sid) for sid in sessions(url)] == [["first", "second", "third"]]


def _user(text: str) -> Any:
    return {"role": "user", "content": text}


def _stored_user_messages(rig: Rig, sid: str) -> list[tuple[Any, ...]]:
    async def load() -> list[tuple[Any, ...]]:
        stored = await rig.gateway.store.load(sid)
        return [m.content for m in stored.messages if isinstance(m, UserMessage)]

    return asyncio.run(load())


def test_a_new_messages_data_url_images_reach_the_model_and_an_http_url_is_refused(
    url: str, rig: Rig
) -> None:
    data = base64.b64encode(png(12, 8)).decode()
    picture = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        first: list[Any] = [
            {"role": "user", "content": [{"type": "text", "text": "what is it?"}, picture]}
        ]
        raw = client.chat.completions.with_raw_response.create(model="stoker", messages=first)
        answer = raw.parse().choices[0].message.content
        sid = raw.headers["x-stoker-session"]
        # the history is resent with its image: only the new message's images are read
        again = [
            *first,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "ok"},
        ]
        assert (
            client.chat.completions.with_raw_response.create(
                model="stoker", messages=again
            ).headers["x-stoker-session"]
            == sid
        )
        elsewhere = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
        with pytest.raises(openai.BadRequestError, match="data: URL") as caught:
            client.chat.completions.create(
                model="stoker", messages=[{"role": "user", "content": [elsewhere]}]
            )
        assert caught.value.code == "invalid_value"
        response = client.responses.create(
            model="stoker",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_image", "image_url": f"data:image/png;base64,{data}"}
                    ],
                }
            ],
        )
    image = ImageBlock(media_type="image/png", data=data)
    assert _stored_user_messages(rig, sid) == [
        (TextBlock(text="what is it?"), image),
        (TextBlock(text="ok"),),
    ]
    assert response.output_text.startswith("Understood: (sent without text)")


# -- conformance: what the SDK's own types and attributes expect -------------------------------


def _strict(url: str, key: str = KEY) -> openai.OpenAI:
    """A client that validates every body against the SDK's types, as it does not by
    default (it builds its objects without checking them)."""
    return openai.OpenAI(
        base_url=url + "/v1", api_key=key, max_retries=0, _strict_response_validation=True
    )


def test_models_are_openais_model_and_an_unknown_one_is_openais_404(url: str, rig: Rig) -> None:
    served = rig.gateway.defaults.model
    with _strict(url) as client:
        listed = client.models.list().data
        retrieved = client.models.retrieve(served)
        for unknown in ("gpt-nothing", f"vendor/{served}"):  # an id's slash arrives as %2F
            with pytest.raises(openai.NotFoundError) as missing:
                client.models.retrieve(unknown)
            assert missing.value.body == {
                "message": f"The model {unknown!r} does not exist here: this gateway serves "
                f"{served!r} (GET /v1/models lists it)",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
    expected = Model(id=served, object="model", created=MODEL_CREATED, owned_by="stoker")
    assert listed == [expected]
    assert retrieved == expected


def test_a_stream_with_usage_says_null_on_every_chunk_but_the_last(url: str) -> None:
    with _strict(url) as client:
        chunks = list(
            client.chat.completions.create(
                model="stoker",
                messages=[_user("hi")],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        plain = list(
            client.chat.completions.create(model="stoker", messages=[_user("hi")], stream=True)
        )
    *before, last = chunks
    assert [("usage" in c.model_fields_set, c.usage) for c in before] == [(True, None)] * len(
        before
    )
    assert before[-1].choices[0].finish_reason == "stop"
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens > 0
    assert not any("usage" in c.model_fields_set for c in plain)


def _events(url: str, body: dict[str, Any]) -> list[Any]:
    """The raw events of a streamed Response, each validated as the SDK's event type."""
    r = httpx.post(
        url + "/v1/responses",
        json={**body, "stream": True},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    frames = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    return [_EVENT.validate_json(frame, strict=False) for frame in frames]


_EVENT: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)


def test_every_responses_stream_event_is_one_the_sdk_parses(url: str) -> None:
    with _strict(url) as client, client.responses.stream(model="stoker", input="hi") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert final.status == "completed"
    cut = _events(url, {"input": "hi", "max_output_tokens": 1})
    assert cut[-1].type == "response.incomplete"


def test_a_failed_responses_stream_ends_with_events_the_sdk_parses(rig: Rig) -> None:
    failing = rig.provider = _Failing(rig.sim)
    failing.failures = 10  # more than the agent retries
    with serve_in_thread(create_app(rig.gateway, tokens=tokens())) as base:
        failed = _events(base, {"input": "hi"})
    assert [e.type for e in failed[-2:]] == ["error", "response.failed"]
    assert failed[-2].code == "provider_error"  # the gateway's code, as elsewhere
    assert failed[-1].response.error is not None
    assert failed[-1].response.error.code == "server_error"  # one of the codes it may hold


class _Failing(ProviderWrapper):
    """The simulator, but its next `failures` calls fail as a provider's 503 would."""

    failures = 0

    async def complete(self, request: Request, context: CallContext) -> Completion:
        if self.failures:
            self.failures -= 1
            raise ProviderError("overloaded", provider="sim", status=503)
        return await self.inner.complete(request, context)


REQUEST_ID = re.compile(r"^req_[0-9a-f]{24}$")


def request_id_of(parsed: Any) -> str | None:
    """The SDK's documented (if underscored) attribute for a response's `x-request-id`."""
    return parsed._request_id  # type: ignore[no-any-return]  # noqa: SLF001


def test_every_openai_response_has_its_own_request_id(url: str, rig: Rig) -> None:
    ids = []
    with _strict(url) as client:
        completion = client.chat.completions.create(model="stoker", messages=[_user("hi")])
        ids.append(request_id_of(completion))
        stream = client.chat.completions.create(
            model="stoker", messages=[_user("again")], stream=True
        )
        _ = list(stream)
        ids.append(stream.response.headers["x-request-id"])
        ids.append(request_id_of(client.responses.create(model="stoker", input="hi")))
        ids.append(request_id_of(client.models.retrieve(rig.gateway.defaults.model)))
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="stoker", messages=[_user("hi")], n=2)
        ids.append(bad.value.request_id)
        with pytest.raises(openai.NotFoundError) as missing:
            client.models.retrieve("gpt-nothing")
        ids.append(missing.value.request_id)
    with _strict(url, key="wrong") as bad_key, pytest.raises(openai.AuthenticationError) as auth:
        bad_key.responses.create(model="stoker", input="hi")
    ids.append(auth.value.request_id)
    ids.append(httpx.put(url + "/v1/responses").headers.get("x-request-id"))  # the router's 405
    assert all(REQUEST_ID.match(str(i)) for i in ids), ids
    assert len(set(ids)) == len(ids)
    assert "x-request-id" not in httpx.get(url + "/healthz").headers  # the gateway's own API


class Ticket(BaseModel):
    title: str
    severity: int


def test_structured_output_through_the_gateway_with_the_sdks_parse_helpers(url: str) -> None:
    """`response_format` (Chat) and `text.format` (Responses) answer JSON of the schema,
    validated; the schema travels in the message, so the session's second turn still
    reads its whole prefix."""
    with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        messages: list[Any] = [{"role": "user", "content": "File a ticket for the crash."}]
        parsed = client.chat.completions.parse(
            model="stoker", messages=messages, response_format=Ticket
        )
        ticket = parsed.choices[0].message.parsed
        assert isinstance(ticket, Ticket)
        messages += [
            {"role": "assistant", "content": parsed.choices[0].message.content},
            {"role": "user", "content": "As JSON, how urgent is it?"},
        ]
        plain = client.chat.completions.create(
            model="stoker", messages=messages, response_format={"type": "json_object"}
        )
        assert isinstance(json.loads(plain.choices[0].message.content or ""), dict)
        assert plain.usage is not None
        assert plain.usage.prompt_tokens_details is not None
        assert plain.usage.prompt_tokens_details.cached_tokens > 0
        answered = client.responses.parse(
            model="stoker", input="File a ticket for the outage.", text_format=Ticket
        )
        assert isinstance(answered.output_parsed, Ticket)
