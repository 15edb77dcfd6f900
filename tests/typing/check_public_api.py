"""What a user's type checker sees of Stoker's public API: checked by `mypy --strict`
(tests/test_typing_examples.py), never run. Each `assert_type` fails the check when a
public signature loses its types."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

from stoker import Agent, Session, TextDelta, Tool, TurnDone, TurnResult, tool
from stoker.agent.stream import TurnStream


class Review(BaseModel):
    verdict: str


@tool
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return str(len(text.split()))


@tool(name="shout")
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say.
    """
    return text.upper()


assert_type(word_count, Tool)
assert_type(shout, Tool)


async def typed_turns(agent: Agent) -> None:
    session = agent.session()
    assert_type(session, Session)
    typed = await session.send("Review this.", output=Review)
    assert_type(typed, TurnResult[Review])
    assert_type(typed.output, Review)
    assert_type(typed.output.verdict, str)
    plain = await session.send("Hello")
    assert_type(plain, TurnResult[Any])
    assert_type(plain.text, str)
    stream = session.stream("Review this.", output=Review)
    assert_type(stream, TurnStream[Review])
    async for event in stream:
        if isinstance(event, TextDelta):
            assert_type(event.text, str)
        elif isinstance(event, TurnDone):
            assert_type(event.result.text, str)


def sync_turns() -> None:
    with Agent("sim:claude-sonnet-4-6", tools=[word_count]) as agent:
        assert_type(agent.run_sync("Review this.", output=Review).output, Review)
        assert_type(agent.run_sync("Hello"), TurnResult[Any])
