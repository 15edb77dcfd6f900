"""Typed results through the public API: each output kind (Pydantic model, dataclass,
TypedDict) on Anthropic and both OpenAI wires, native when it is the agent's own type and
in the message when a turn asks for another, a validation retry, `OutputError`, partial
objects in a stream, and what each mechanism does to the cache."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, field_validator
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only on 3.12+

from stoker import Agent, OutputDelta, OutputError, TurnDone
from stoker.providers.sim.model import ScriptedModel
from stoker.testing import assert_no_undeclared_breaks
from tests.helpers import sim_agent

WIRES = [
    ("claude-sonnet-4-6", "anthropic"),
    ("gpt-5.6", "openai_chat"),
    ("gpt-5.6", "openai_responses"),
]


class Invoice(BaseModel):
    number: str
    total: float
    paid: bool


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


def _agent(model: str, api: str, **kwargs: Any) -> tuple[Agent, Any]:
    agent, provider = sim_agent(llm=model, **kwargs)
    provider.openai_api = api if api != "anthropic" else provider.openai_api
    return agent, provider


def _format_of(payload: dict[str, Any]) -> Any:
    return (
        (payload.get("output_config") or {}).get("format")
        or payload.get("response_format")
        or (payload.get("text") or {}).get("format")
    )


@pytest.mark.parametrize(("model", "api"), WIRES)
@pytest.mark.parametrize("kind", [Invoice, Point, Person])
async def test_the_agents_own_output_type_is_native_and_validated(
    model: str, api: str, kind: Any
) -> None:
    agent, provider = _agent(model, api, output=kind)
    session = agent.session()
    result = await session.send("Read it.")
    if kind is Person:
        assert set(result.output) == {"name", "age"}
    else:
        assert isinstance(result.output, kind)
    assert json.loads(result.text)  # the answer itself is the JSON
    sent = provider.requests[-1]
    assert _format_of(sent) is not None  # asked for natively, as part of the prefix
    assert "JSON schema" not in json.dumps(sent.get("messages") or sent.get("input"))
    second = await session.send("And the next one.")
    assert second.output is not None
    assert second.records[0].usage.read > 0  # the format is stable: the prefix reads
    assert_no_undeclared_breaks(session.records)


@pytest.mark.parametrize(("model", "api"), WIRES)
async def test_a_turn_asking_for_another_type_keeps_the_prefix(model: str, api: str) -> None:
    agent, provider = _agent(model, api)
    session = agent.session()
    await session.send("hello")
    kinds = [Invoice, Point, Person]
    for kind in kinds:
        result = await session.send("Now as data.", output=kind)
        assert result.output is not None
        sent = provider.requests[-1]
        assert _format_of(sent) is None  # nothing in the prefix moved
        assert "JSON schema" in json.dumps(sent.get("messages") or sent.get("input"))
    assert all(r.explanation.verdict in ("hit", "first") for r in session.records)
    assert_no_undeclared_breaks(session.records)


async def test_a_reply_that_does_not_validate_goes_back_with_what_was_wrong() -> None:
    class Order(BaseModel):
        count: int

        @field_validator("count")
        @classmethod
        def positive(cls, value: int) -> int:
            if value <= 0:
                raise ValueError("must be positive")
            return value

    model = ScriptedModel(['{"count": -1}', '{"count": 3}'])
    agent, provider = sim_agent(model=model, output=Order)
    result = await agent.session().send("How many?")
    assert result.output == Order(count=3)
    assert result.iterations == 2
    told = json.dumps(provider.requests[-1]["messages"][-1])
    assert "count" in told
    assert "must be positive" in told


async def test_output_error_names_the_field_and_the_reason_after_the_retries() -> None:
    # Asked for in the message (a native format would have the provider keep the schema)
    model = ScriptedModel(['{"number": "A1", "total": "lots", "paid": true}'] * 3)
    agent, _ = sim_agent(model=model, output_retries=2)
    session = agent.session()
    with pytest.raises(OutputError) as raised:
        await session.send("Read it.", output=Invoice)
    assert raised.value.field == "total"
    assert "number" in raised.value.reason.lower() or "float" in raised.value.reason.lower()
    assert raised.value.retries == 2
    assert model.remaining == 0
    assert len(session.history) == 6  # every attempt and correction is in the conversation


async def test_a_structured_answer_streams_as_partial_objects() -> None:
    model = ScriptedModel([json.dumps({"number": "A-17", "total": 12.5, "paid": False})])
    agent, _ = sim_agent(model=model)
    events = [e async for e in agent.session().stream("Read it.", output=Invoice)]
    partials = [e.partial for e in events if isinstance(e, OutputDelta)]
    assert partials
    assert partials[-1] == {"number": "A-17", "total": 12.5, "paid": False}
    assert isinstance(events[-1], TurnDone)
    assert events[-1].result.output == Invoice(number="A-17", total=12.5, paid=False)


async def test_str_is_plain_text() -> None:
    agent, provider = sim_agent()
    result = await agent.session().send("hi", output=str)
    assert result.output == result.text
    assert _format_of(provider.requests[-1]) is None
