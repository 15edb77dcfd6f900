"""The simulator keeps the Anthropic Messages API's contracts, through the official SDK and
its helpers (`messages.parse`, the beta tool runner, streams), directly and through the
proxy in both modes. Each check is what the real API documents or does.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest
from pydantic import BaseModel

from tests.sim_routes import ROUTES, SYSTEM, Routes, fresh_key

MODEL = "claude-sonnet-4-6"
WEATHER = {
    "name": "get_weather",
    "description": "The weather now in a city.",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "unit"],
    },
}


class Invoice(BaseModel):
    number: str
    total: float
    paid: bool
    lines: list[str]


def ask(claude: anthropic.Anthropic, text: str = "Is this diff safe?", **extra: Any) -> Any:
    args: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": text}],
    }
    return claude.messages.create(**{**args, **extra})


def total(usage: Any) -> int:
    """Every input token, however the cache split them (the optimizing proxy adds markers)."""
    read = usage.cache_read_input_tokens or 0
    return int(usage.input_tokens + (usage.cache_creation_input_tokens or 0) + read)


def raw(url: str, body: dict[str, Any]) -> httpx.Response:
    """A request the SDK would not let through (its types require what the API requires)."""
    headers = {"x-api-key": fresh_key(), "anthropic-version": "2023-06-01"}
    return httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=10)


# -- requests the API refuses, and how ------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_no_messages_is_a_json_400_not_a_crash(routes: Routes, route: str) -> None:
    got = raw(routes.urls[route], {"model": MODEL, "max_tokens": 10, "messages": []})
    assert got.status_code == 400
    assert got.json()["error"]["type"] == "invalid_request_error"
    assert "at least one message" in got.json()["error"]["message"]
    assert got.headers["request-id"].startswith("req_")


@pytest.mark.parametrize("route", ROUTES)
def test_max_tokens_is_required(routes: Routes, route: str) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    got = raw(routes.urls[route], body)
    assert got.status_code == 400
    assert got.json()["error"]["message"] == "max_tokens: Field required"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "greater than or equal to 1024"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "must be greater than"),
        # The SDK no longer types the sampling parameters; older clients still send them.
        ({"extra_body": {"temperature": 1.5}}, "less than or equal to 1"),
        ({"extra_body": {"top_p": -0.1}}, "greater than or equal to 0"),
        (
            {
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "extra_body": {"temperature": 0.5},
            },
            "temperature",
        ),
        ({"tool_choice": {"type": "any"}}, "only be specified while providing tools"),
        ({"stop_sequences": ["  "]}, "non-whitespace"),
    ],
)
def test_what_the_api_refuses_is_a_400_naming_the_problem(
    claude: anthropic.Anthropic, extra: dict[str, Any], says: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=says):
        ask(claude, max_tokens=2048, **extra)


def test_thinking_with_a_forced_tool_is_refused(claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="forces tool use"):
        ask(
            claude,
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 1024},
            tools=[WEATHER],
            tool_choice={"type": "any"},
        )


# -- content the API takes ------------------------------------------------------------------


def test_an_image_by_url_is_accepted_counted_and_never_fetched(claude: anthropic.Anthropic) -> None:
    # .invalid never resolves (RFC 2606): an answer proves the URL was not fetched.
    image = {"type": "image", "source": {"type": "url", "url": "https://images.invalid/cat.png"}}
    text = {"type": "text", "text": "What is in this picture?"}
    with_image = ask(claude, text="", messages=[{"role": "user", "content": [image, text]}])
    without = ask(claude, text="", messages=[{"role": "user", "content": [text]}])
    assert with_image.stop_reason == "end_turn"
    assert total(with_image.usage) > total(without.usage)


def test_documents_pdf_and_plain_text_are_accepted_and_counted(claude: anthropic.Anthropic) -> None:
    pdf = base64.b64encode(b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF").decode()
    blocks = [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."},
            "title": "facts",
        },
        {"type": "text", "text": "Summarise both."},
    ]
    got = ask(claude, messages=[{"role": "user", "content": blocks}])
    bare = ask(claude, messages=[{"role": "user", "content": blocks[-1:]}])
    assert total(got.usage) > total(bare.usage)
    counted = claude.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": blocks}]
    )
    assert counted.input_tokens == total(got.usage)


# -- what the answer respects ---------------------------------------------------------------


def test_max_tokens_cuts_the_answer_and_says_so(claude: anthropic.Anthropic) -> None:
    long = "Please look at every file of the repository and report what each one does. " * 3
    got = ask(claude, text=long, max_tokens=3)
    assert got.stop_reason == "max_tokens"
    assert got.usage.output_tokens == 3
    full = ask(claude, text=long)
    assert full.content[0].text.startswith(got.content[0].text)
    assert len(got.content[0].text) < len(full.content[0].text)


def test_a_stop_sequence_ends_the_text_before_it(claude: anthropic.Anthropic) -> None:
    got = ask(claude, text="alpha beta gamma", stop_sequences=["gamma", "zeta"])
    assert got.stop_reason == "stop_sequence"
    assert got.stop_sequence == "gamma"
    assert "gamma" not in got.content[0].text
    assert got.content[0].text.endswith("beta ")


def test_a_streamed_answer_is_cut_the_same_way(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model=MODEL,
        max_tokens=1024,
        stop_sequences=["gamma"],
        messages=[{"role": "user", "content": "alpha beta gamma"}],
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence"
    assert final.stop_sequence == "gamma"


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}])
def test_a_forced_tool_choice_is_always_a_schema_valid_call(
    claude: anthropic.Anthropic, choice: dict[str, Any]
) -> None:
    got = ask(claude, text="Tell me a joke.", tools=[WEATHER], tool_choice=choice)
    assert got.stop_reason == "tool_use"
    [call] = got.content
    assert call.type == "tool_use"
    assert call.name == "get_weather"
    jsonschema.validate(call.input, WEATHER["input_schema"])
    again = ask(claude, text="Tell me a joke.", tools=[WEATHER], tool_choice=choice)
    assert again.content[0].input == call.input  # deterministic


def test_structured_output_parses_into_the_model(claude: anthropic.Anthropic) -> None:
    parsed = claude.messages.parse(
        model=MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": "Read the invoice."}],
        output_format=Invoice,
    )
    assert isinstance(parsed.parsed_output, Invoice)
    assert json.loads(parsed.content[0].text) == parsed.parsed_output.model_dump()


def test_the_beta_tool_runner_runs_the_tool_then_answers(claude: anthropic.Anthropic) -> None:
    calls: list[str] = []

    @anthropic.beta_tool
    def get_weather(city: str) -> str:
        """The weather now in a city."""
        calls.append(city)
        return f"Sunny in {city}"

    runner = claude.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=1024,
        tools=[get_weather],
        messages=[{"role": "user", "content": "Use get_weather for Paris."}],
    )
    final = runner.until_done()
    assert calls  # the tool ran
    assert final.stop_reason == "end_turn"
    assert "Sunny in" in final.content[-1].text


# -- endpoints and identity -----------------------------------------------------------------


def test_models_list_and_retrieve(claude: anthropic.Anthropic) -> None:
    listed = {m.id for m in claude.models.list()}
    assert MODEL in listed
    assert all(not name.startswith("gpt") for name in listed)
    one = claude.models.retrieve(MODEL)
    assert one.id == MODEL
    assert one.type == "model"
    with pytest.raises(anthropic.NotFoundError):
        claude.models.retrieve("claude-unknown-9")


def test_every_answer_carries_a_request_id(claude: anthropic.Anthropic) -> None:
    got = ask(claude)
    assert got._request_id is not None  # noqa: SLF001 (the SDKs' documented name)
    assert got._request_id.startswith("req_")  # noqa: SLF001 (the SDKs' documented name)
    assert got.id.startswith("msg_01")
    with pytest.raises(anthropic.BadRequestError) as refused:
        ask(claude, extra_body={"temperature": 3})
    assert refused.value.request_id is not None


def test_a_long_system_prompt_still_caches_after_the_contract_checks(
    claude: anthropic.Anthropic,
) -> None:
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    first = ask(claude, system=system)
    second = ask(claude, system=system, text="And this one?")
    assert first.usage.cache_creation_input_tokens > 1000
    # the system prompt at least (the optimizing proxy also caches the first question)
    assert second.usage.cache_read_input_tokens >= total(first.usage) - 20
