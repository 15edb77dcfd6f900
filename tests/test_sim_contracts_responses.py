"""The simulator keeps the OpenAI Responses API's contracts, through the official SDK and its
helpers (`responses.parse`, `responses.stream`, `input_tokens.count`, stored responses),
directly and through the proxy in both modes. Each check is what the real API documents
or does.
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

from tests.sim_routes import ROUTES, SYSTEM, Routes, assert_refused, fresh_key

PLAIN = "gpt-4.1"
REASONING = "gpt-5.6"
TOOL = {
    "type": "function",
    "name": "create_event",
    "description": "Put an event in the calendar.",
    "parameters": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 3},
            "start": {"type": "string", "format": "date-time"},
            "attendees": {"type": "array", "items": {"type": "string", "format": "email"}},
        },
        "required": ["title", "start", "attendees"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Plan(BaseModel):
    steps: list[str]
    done: bool
    effort_hours: float


def respond(gpt: openai.OpenAI, prompt: str = "Is this diff safe?", **extra: Any) -> Any:
    return gpt.responses.create(**{"model": PLAIN, "input": prompt, **extra})


# -- requests the API refuses or takes ------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("instructions", [None, "Be terse."])
def test_empty_input_is_a_json_400_not_a_crash(
    routes: Routes, route: str, instructions: str | None
) -> None:
    body: dict[str, Any] = {"model": PLAIN, "input": []}
    if instructions:
        body["instructions"] = instructions
    got = httpx.post(
        routes.urls[route] + "/v1/responses",
        json=body,
        headers={"authorization": f"Bearer {fresh_key()}"},
        timeout=10,
    )
    assert got.status_code == 400
    assert got.json()["error"]["param"] == "input"


def test_only_a_developer_message_is_answered(gpt: openai.OpenAI) -> None:
    got = respond(gpt, prompt="", input=[{"role": "developer", "content": "You are terse."}])
    assert got.status == "completed"
    assert got.output_text


def test_a_developer_message_after_the_first_turn_is_accepted(gpt: openai.OpenAI) -> None:
    got = respond(
        gpt,
        input=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "developer", "content": "Answer in French from now on."},
            {"role": "user", "content": "how are you"},
        ],
    )
    assert got.status == "completed"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"max_output_tokens": 8}, "max_output_tokens"),
        ({"temperature": 2.5}, "temperature"),
        ({"include": ["everything"]}, "include[0]"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"reasoning": {"effort": "high"}}, "reasoning.effort"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ],
)
def test_what_the_api_refuses_is_a_400_naming_the_parameter(
    gpt: openai.OpenAI, extra: dict[str, Any], param: str
) -> None:
    assert_refused(partial(respond, gpt), param, **extra)


# -- content the API takes ------------------------------------------------------------------


def test_an_image_by_url_and_a_file_are_accepted_and_counted(gpt: openai.OpenAI) -> None:
    pdf = base64.b64encode(b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF").decode()
    parts = [
        {"type": "input_text", "text": "Compare them."},
        {"type": "input_image", "image_url": "https://images.invalid/cat.png", "detail": "low"},
        {
            "type": "input_file",
            "filename": "a.pdf",
            "file_data": f"data:application/pdf;base64,{pdf}",
        },
        {"type": "input_file", "file_url": "https://files.invalid/b.pdf"},
    ]
    got = respond(gpt, input=[{"role": "user", "content": parts}])
    bare = respond(gpt, input=[{"role": "user", "content": parts[:1]}])
    assert got.usage.input_tokens > bare.usage.input_tokens
    counted = gpt.responses.input_tokens.count(
        model=PLAIN, input=[{"role": "user", "content": parts}]
    )
    assert counted.input_tokens == got.usage.input_tokens


# -- the Response object --------------------------------------------------------------------


def test_the_response_echoes_the_request(gpt: openai.OpenAI) -> None:
    fmt = {
        "type": "json_schema",
        "name": "plan",
        "schema": Plan.model_json_schema() | {"additionalProperties": False},
        "strict": False,
    }
    got = respond(
        gpt,
        instructions="Plan the work.",
        tools=[TOOL],
        tool_choice="auto",
        temperature=0.5,
        max_output_tokens=500,
        store=False,
        metadata={"ticket": "T-1"},
        text={"format": fmt},
    )
    assert got.instructions == "Plan the work."
    assert [t.name for t in got.tools] == ["create_event"]
    assert got.tool_choice == "auto"
    assert got.temperature == 0.5
    assert got.max_output_tokens == 500
    assert got.store is False
    assert got.metadata == {"ticket": "T-1"}
    assert got.text.format.type == "json_schema"
    assert got.text.format.name == "plan"
    assert got.created_at > 1_700_000_000
    assert got._request_id is not None  # noqa: SLF001 (the SDKs' documented name)
    assert got.id.startswith("resp_")


def test_max_output_tokens_ends_incomplete(gpt: openai.OpenAI) -> None:
    long = "Please look at every file of the repository and report what each one does. " * 3
    got = respond(gpt, prompt=long, max_output_tokens=16)
    assert got.status == "incomplete"
    assert got.incomplete_details.reason == "max_output_tokens"
    assert got.usage.output_tokens == 16


def test_a_reasoning_model_returns_its_reasoning_item(gpt: openai.OpenAI) -> None:
    got = respond(
        gpt,
        model=REASONING,
        reasoning={"effort": "medium", "summary": "auto"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    reasoning = got.output[0]
    assert reasoning.type == "reasoning"
    assert reasoning.encrypted_content
    assert reasoning.summary[0].text
    assert got.usage.output_tokens_details.reasoning_tokens > 0
    # Stateless replay: the output items go back as input, encrypted reasoning included.
    turn = [{"role": "user", "content": "Is this diff safe?"}]
    replayed = [item.model_dump(exclude_none=True) for item in got.output]
    again = respond(
        gpt,
        model=REASONING,
        input=[*turn, *replayed, {"role": "user", "content": "And now?"}],
        reasoning={"effort": "medium"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    assert again.status == "completed"


# -- stored responses -----------------------------------------------------------------------


def test_previous_response_id_continues_the_conversation(gpt: openai.OpenAI) -> None:
    first = respond(gpt, instructions=SYSTEM, prompt="Remember the word PELICAN.")
    second = respond(gpt, prompt="Which word?", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    # The chained request holds the first one's input and output, then its own.
    assert second.usage.input_tokens > first.usage.output_tokens + 4
    retrieved = gpt.responses.retrieve(second.id)
    assert retrieved.id == second.id
    assert retrieved.output_text == second.output_text
    items = list(gpt.responses.input_items.list(second.id))
    assert any("PELICAN" in json.dumps(i.model_dump()) for i in items)


def test_unknown_or_unstored_previous_responses_are_400s(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="not found") as unknown:
        respond(gpt, previous_response_id="resp_nope")
    assert unknown.value.param == "previous_response_id"
    unstored = respond(gpt, store=False)
    with pytest.raises(openai.BadRequestError, match="not found"):
        respond(gpt, previous_response_id=unstored.id)
    with pytest.raises(openai.NotFoundError):
        gpt.responses.retrieve(unstored.id)


def test_item_references_and_deletion(gpt: openai.OpenAI) -> None:
    first = respond(gpt, prompt="Say something.")
    message_id = first.output[-1].id
    got = respond(
        gpt,
        input=[
            {"role": "user", "content": "Say something."},
            {"type": "item_reference", "id": message_id},
            {"role": "user", "content": "Again."},
        ],
    )
    assert got.status == "completed"
    with pytest.raises(openai.BadRequestError, match="not found"):
        respond(gpt, input=[{"type": "item_reference", "id": "msg_nope"}])
    gpt.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        gpt.responses.retrieve(first.id)


# -- contracts the model cannot break -------------------------------------------------------


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "create_event"}])
def test_a_forced_tool_choice_is_always_a_schema_valid_call(
    gpt: openai.OpenAI, choice: Any
) -> None:
    got = respond(gpt, prompt="Tell me a joke.", tools=[TOOL], tool_choice=choice)
    [call] = [item for item in got.output if item.type == "function_call"]
    assert call.name == "create_event"
    assert call.call_id.startswith("call_")
    jsonschema.validate(
        json.loads(call.arguments),
        TOOL["parameters"],
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


@pytest.mark.parametrize("model", [PLAIN, REASONING])
def test_structured_output_parses_into_the_model(gpt: openai.OpenAI, model: str) -> None:
    got = gpt.responses.parse(model=model, input="Plan the release.", text_format=Plan)
    assert isinstance(got.output_parsed, Plan)


def test_structured_output_streams(gpt: openai.OpenAI) -> None:
    with gpt.responses.stream(model=PLAIN, input="Plan the release.", text_format=Plan) as stream:
        final = stream.get_final_response()
    assert isinstance(final.output_parsed, Plan)


def test_logprobs_come_back_when_included(gpt: openai.OpenAI) -> None:
    got = respond(gpt, include=["message.output_text.logprobs"], top_logprobs=1)
    part = got.output[-1].content[0]
    assert "".join(p.token for p in part.logprobs) == part.text
