"""The simulator keeps the OpenAI Chat Completions API's contracts, through the official SDK
and its helpers (`chat.completions.parse`, `pydantic_function_tool`, streams), directly
and through the proxy in both modes. Each check is what the real API documents or does.
"""

from __future__ import annotations

import base64
import json
from functools import partial
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

from tests.sim_routes import ROUTES, Routes, assert_refused, fresh_key

PLAIN = "gpt-4.1"  # takes stop, logprobs, temperature
REASONING = "gpt-5.6"  # a reasoning model
TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order by its number.",
        "parameters": {
            "type": "object",
            "properties": {
                "order": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
                "fields": {"type": "array", "items": {"enum": ["status", "total"]}, "minItems": 1},
            },
            "required": ["order", "fields"],
            "additionalProperties": False,
        },
    },
}


class Ticket(BaseModel):
    title: str
    severity: int
    tags: list[str]


class LookupOrder(BaseModel):
    """Find an order by its number."""

    order: str
    express: bool


def chat(gpt: openai.OpenAI, text: str = "Is this diff safe?", **extra: Any) -> Any:
    args: dict[str, Any] = {"model": PLAIN, "messages": [{"role": "user", "content": text}]}
    return gpt.chat.completions.create(**{**args, **extra})


def total(usage: Any) -> int:
    return int(usage.prompt_tokens)


# -- requests the API refuses or takes ------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_no_messages_is_a_json_400_not_a_crash(routes: Routes, route: str) -> None:
    got = httpx.post(
        routes.urls[route] + "/v1/chat/completions",
        json={"model": PLAIN, "messages": []},
        headers={"authorization": f"Bearer {fresh_key()}"},
        timeout=10,
    )
    assert got.status_code == 400
    assert got.json()["error"]["param"] == "messages"
    assert got.json()["error"]["code"] == "empty_array"
    assert got.headers["x-request-id"].startswith("req_")


def test_only_a_system_message_is_answered(gpt: openai.OpenAI) -> None:
    got = gpt.chat.completions.create(
        model=PLAIN, messages=[{"role": "system", "content": "You are terse."}]
    )
    assert got.choices[0].finish_reason == "stop"
    assert got.choices[0].message.content


def test_a_system_message_after_the_first_turn_is_accepted(gpt: openai.OpenAI) -> None:
    got = gpt.chat.completions.create(
        model=PLAIN,
        messages=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "developer", "content": "From now on answer in French."},
            {"role": "user", "content": "how are you"},
        ],
    )
    assert got.choices[0].message.content


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"temperature": 3}, "temperature"),
        ({"n": 0}, "n"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"response_format": {"type": "json_object"}}, "messages"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
    ],
)
def test_what_the_api_refuses_is_a_400_naming_the_parameter(
    gpt: openai.OpenAI, extra: dict[str, Any], param: str
) -> None:
    assert_refused(partial(chat, gpt), param, **extra)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"temperature": 0.2}, "temperature"),
        ({"stop": "x"}, "stop"),
        ({"logprobs": True}, "logprobs"),
        ({"max_tokens": 50}, "max_tokens"),
    ],
)
def test_a_reasoning_model_refuses_what_it_does_not_support(
    gpt: openai.OpenAI, extra: dict[str, Any], param: str
) -> None:
    assert_refused(partial(chat, gpt, model=REASONING), param, **extra)


def test_a_strict_schema_must_be_closed(gpt: openai.OpenAI) -> None:
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    with pytest.raises(openai.BadRequestError, match="additionalProperties"):
        chat(
            gpt,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "thing", "schema": open_schema, "strict": True},
            },
        )


# -- content the API takes ------------------------------------------------------------------


def test_an_image_by_url_is_accepted_counted_and_never_fetched(gpt: openai.OpenAI) -> None:
    text = {"type": "text", "text": "What is in this picture?"}
    image = {"type": "image_url", "image_url": {"url": "https://images.invalid/cat.png"}}
    with_image = chat(gpt, messages=[{"role": "user", "content": [text, image]}])
    without = chat(gpt, messages=[{"role": "user", "content": [text]}])
    assert total(with_image.usage) > total(without.usage)


def test_a_file_part_is_accepted_and_counted(gpt: openai.OpenAI) -> None:
    pdf = base64.b64encode(b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF").decode()
    part = {
        "type": "file",
        "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf}"},
    }
    text = {"type": "text", "text": "Summarise it."}
    got = chat(gpt, messages=[{"role": "user", "content": [part, text]}])
    bare = chat(gpt, messages=[{"role": "user", "content": [text]}])
    assert total(got.usage) > total(bare.usage)


def test_an_image_in_a_tool_message_is_refused(gpt: openai.OpenAI) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": "{}"},
    }
    image = {"type": "image_url", "image_url": {"url": "https://images.invalid/a.png"}}
    with pytest.raises(openai.BadRequestError, match="only allowed for messages with role 'user'"):
        chat(
            gpt,
            tools=[TOOL],
            messages=[
                {"role": "user", "content": "get it"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": [image]},
            ],
        )


# -- what the answer respects ---------------------------------------------------------------


def test_max_tokens_cuts_the_answer_with_finish_reason_length(gpt: openai.OpenAI) -> None:
    long = "Please look at every file of the repository and report what each one does. " * 3
    got = chat(gpt, text=long, max_completion_tokens=3)
    assert got.choices[0].finish_reason == "length"
    assert got.usage.completion_tokens == 3
    legacy = chat(gpt, text=long, max_tokens=3)
    assert legacy.choices[0].message.content == got.choices[0].message.content


def test_stop_cuts_the_text_before_the_sequence(gpt: openai.OpenAI) -> None:
    got = chat(gpt, text="alpha beta gamma", stop=["gamma"])
    assert got.choices[0].finish_reason == "stop"
    assert got.choices[0].message.content.endswith("beta ")


def test_n_returns_that_many_choices(gpt: openai.OpenAI) -> None:
    one = chat(gpt)
    got = chat(gpt, n=3)
    assert [c.index for c in got.choices] == [0, 1, 2]
    assert got.usage.completion_tokens == 3 * one.usage.completion_tokens


def test_n_choices_stream_with_their_indices(gpt: openai.OpenAI) -> None:
    chunks = list(chat(gpt, n=2, stream=True, stream_options={"include_usage": True}))
    texts: dict[int, str] = {}
    for chunk in chunks[:-1]:
        assert chunk.usage is None
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert set(texts) == {0, 1}
    assert texts[0] == texts[1] != ""


def test_logprobs_come_back_when_asked(gpt: openai.OpenAI) -> None:
    got = chat(gpt, logprobs=True, top_logprobs=2)
    content = got.choices[0].logprobs.content
    assert "".join(t.token for t in content) == got.choices[0].message.content
    assert all(t.logprob == 0.0 and t.top_logprobs[0].token == t.token for t in content)


def test_a_reasoning_model_reports_reasoning_tokens(gpt: openai.OpenAI) -> None:
    got = chat(gpt, model=REASONING, reasoning_effort="low")
    details = got.usage.completion_tokens_details
    assert details.reasoning_tokens > 0
    assert got.usage.completion_tokens > details.reasoning_tokens


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "lookup_order"}}]
)
def test_a_forced_tool_choice_is_always_a_schema_valid_call(
    gpt: openai.OpenAI, choice: Any
) -> None:
    got = chat(gpt, text="Tell me a joke.", tools=[TOOL], tool_choice=choice)
    assert got.choices[0].finish_reason == "tool_calls"
    [call] = got.choices[0].message.tool_calls
    assert call.id.startswith("call_")
    assert call.function.name == "lookup_order"
    jsonschema.validate(json.loads(call.function.arguments), TOOL["function"]["parameters"])


def test_parse_with_a_pydantic_tool(gpt: openai.OpenAI) -> None:
    got = gpt.chat.completions.parse(
        model=PLAIN,
        messages=[{"role": "user", "content": "Find order AB-1234."}],
        tools=[openai.pydantic_function_tool(LookupOrder)],
        tool_choice="required",
    )
    [call] = got.choices[0].message.tool_calls
    assert isinstance(call.function.parsed_arguments, LookupOrder)


@pytest.mark.parametrize("model", [PLAIN, REASONING])
def test_structured_output_parses_into_the_model(gpt: openai.OpenAI, model: str) -> None:
    got = gpt.chat.completions.parse(
        model=model,
        messages=[{"role": "user", "content": "File a ticket for the crash."}],
        response_format=Ticket,
    )
    assert isinstance(got.choices[0].message.parsed, Ticket)


def test_structured_output_streams(gpt: openai.OpenAI) -> None:
    with gpt.chat.completions.stream(
        model=PLAIN,
        messages=[{"role": "user", "content": "File a ticket for the crash."}],
        response_format=Ticket,
    ) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, Ticket)


def test_json_object_mode_answers_a_json_object(gpt: openai.OpenAI) -> None:
    got = chat(gpt, text="Answer in JSON.", response_format={"type": "json_object"})
    assert isinstance(json.loads(got.choices[0].message.content), dict)


# -- endpoints and identity -----------------------------------------------------------------


def test_models_list_and_retrieve(gpt: openai.OpenAI) -> None:
    listed = list(gpt.models.list())
    assert PLAIN in {m.id for m in listed}
    assert all(m.created > 0 and m.object == "model" for m in listed)
    assert all(not m.id.startswith("claude") for m in listed)
    assert gpt.models.retrieve(PLAIN).id == PLAIN
    with pytest.raises(openai.NotFoundError):
        gpt.models.retrieve("gpt-unknown-9")


def test_identity_of_an_answer(gpt: openai.OpenAI) -> None:
    raw = gpt.chat.completions.with_raw_response.create(
        model=PLAIN, messages=[{"role": "user", "content": "hi"}]
    )
    got = raw.parse()
    assert raw.request_id is not None
    assert got.id.startswith("chatcmpl-")
    assert got.created > 1_700_000_000
