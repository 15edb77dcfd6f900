"""What a user's type checker sees of the public API, checked by `mypy --strict`
(tests/test_typing_examples.py) against the package as users install it; never run.

Each `assert_type` is a regression test for one promise of the types: the result of a turn
that asks for `output=Review` holds a `Review` (or None: a turn can end without an answer,
`exit == "budget_exhausted"`), `@tool` makes a `Tool`, the names `stoker` loads lazily are
the real classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict, assert_type

from pydantic import BaseModel

from stoker import (
    Agent,
    AnthropicProvider,
    GatewayError,
    OtelTelemetry,
    Provider,
    Session,
    StokerError,
    TextDelta,
    Tool,
    ToolContext,
    TurnDone,
    TurnResult,
    TurnStream,
    select_provider,
    tool,
)


class Review(BaseModel):
    verdict: str


@dataclass
class Summary:
    title: str


class Row(TypedDict):
    name: str


@tool
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return str(len(text.split()))


@tool(risky=True, name="add-note")
async def add_note(text: str, context: ToolContext) -> str:
    """Add a line to the notes."""
    return "added"


def tools() -> None:
    assert_type(word_count, Tool)
    assert_type(add_note, Tool)
    assert_type(tool(lambda: "x"), Tool)
    assert_type(word_count.name, str)
    assert_type(word_count.input_schema, dict[str, Any])
    assert_type(word_count.spec_bytes, bytes)


async def turns() -> None:
    async with Agent("sim:claude-sonnet-4-6", tools=[word_count, add_note]) as agent:
        assert_type(agent, Agent)
        session = agent.session()
        assert_type(session, Session)

        typed = await session.send("Review this.", output=Review)
        assert_type(typed, TurnResult[Review])
        assert_type(typed.output, Review | None)  # None: the turn ran out of iterations
        if typed.output is not None:
            assert_type(typed.output.verdict, str)
        assert_type(typed.text, str)
        assert_type(typed.usage.read, int)
        assert_type(typed.cost_usd, float | None)

        assert_type(await session.send("A summary.", output=Summary), TurnResult[Summary])
        assert_type(await session.send("Rows.", output=list[Row]), TurnResult[list[Row]])
        assert_type(await session.send("Plain.", output=str), TurnResult[str])
        # The agent's own output type (`Agent(output=...)`) is not known statically, nor is
        # the value of a type expression that is no class.
        assert_type(await session.send("Hello!"), TurnResult[Any])
        assert_type(await session.send("Either.", output=Review | Summary), TurnResult[Any])

        stream = session.stream("Review this.", output=Review)
        assert_type(stream, TurnStream[Review])
        async for event in stream:
            if isinstance(event, TextDelta):
                assert_type(event.text, str)
            elif isinstance(event, TurnDone):
                assert_type(event.result.exit, Literal["answered", "budget_exhausted"])
        assert_type(await stream.result(), TurnResult[Review])
        assert_type(session.stream("Hello!"), TurnStream[Any])

        fork = session.fork()
        assert_type(fork, Session)


def without_a_loop() -> None:
    with Agent("sim:claude-sonnet-4-6") as agent:
        assert_type(agent, Agent)
        assert_type(agent.run_sync("Safe?", output=Review), TurnResult[Review])
        assert_type(agent.run_sync("Safe?"), TurnResult[Any])
        session = agent.session()
        assert_type(session.send_sync("Safe?", output=Review), TurnResult[Review])
        assert_type(session.send_sync("Safe?"), TurnResult[Any])


def lazily_loaded(anthropic: AnthropicProvider, telemetry: OtelTelemetry) -> None:
    # Each name is its class, not the `object` that `stoker.__getattr__` returns.
    provider: Provider = anthropic
    assert_type(provider, Provider)
    assert_type(issubclass(GatewayError, StokerError), bool)
    assert_type(telemetry, OtelTelemetry)
    assert_type(select_provider("sim:claude-sonnet-4-6").provider, Provider)
