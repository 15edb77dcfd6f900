"""A model's output is untrusted input: whatever tool call it returns (bad JSON, nesting
deeper than a parser goes, numbers too long to convert, lone surrogates, unknown or empty
names, wrong types) ends as a tool error result the model sees, and the session keeps
answering, stored and resumed, on every dialect."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.agent.agent import Agent
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.wire.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.messages import AssistantMessage, Message, UserMessage, tool_results
from stoker.wire.request import Request
from tests.child_processes import run_python
from tests.helpers import SYSTEM, make_registry

DIALECTS = {  # model, the sim's OpenAI API
    "anthropic": ("claude-sonnet-4-6", "openai_responses"),
    "openai_responses": ("gpt-5.6", "openai_responses"),
    "openai_chat": ("gpt-5.6", "openai_chat"),
}

arguments = st.one_of(
    st.text(max_size=30),  # mostly not JSON at all
    st.integers(min_value=1000, max_value=3000).map(
        lambda d: '{"text": ' + "[" * d + "]" * d + "}"
    ),
    st.integers(min_value=4301, max_value=6000).map(lambda n: '{"text": ' + "7" * n + "}"),
    st.sampled_from(['{"text": "\\ud800"}', '{"text": "a\\udfff"}', '"\\ud83d"', "\ud800"]),
    st.sampled_from(["[1, 2]", "5", "null", '{"text": 5}', '{"text": {"a": []}}', "{}", ""]),
    st.text(max_size=20).map(lambda t: json.dumps({"text": t})),
)
names = st.one_of(
    st.sampled_from(["read_file", "list_files", "", "no_such_tool", "read\ud800file"]),
    st.text(max_size=12),
)


class Malformed:
    """Answers "go" with one tool call as given, anything else with a sentence."""

    def __init__(self, name: str, args: str) -> None:
        self.call = ToolUseBlock(id="toolu_fuzz1", name=name, input_json=args)

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text == "go":
            return (self.call,)
        return (TextBlock(text="fine"),)


def _agent(dialect: str, model: Any, clock: FrozenClock) -> Agent:
    name, api = DIALECTS[dialect]
    provider = SimProvider(engine=SimEngine(model=model), clock=clock, openai_api=api)
    return Agent(name, provider=provider, registry=make_registry(), system=SYSTEM, clock=clock)


async def _survives(tmp: Path, dialect: str, name: str, args: str) -> str:
    clock = FrozenClock()
    agent = _agent(dialect, Malformed(name, args), clock)
    async with SQLiteStore(tmp / "fuzz.db") as store:
        session = await agent.open(store, None)
        await session.send("go")
        result = await session.fork().send("and now?")  # a fork of it is sendable too
        assert result.text == "fine"
        answer = await session.send("hello again")
        assert answer.text == "fine"
    async with SQLiteStore(tmp / "fuzz.db") as store:  # read back from the file
        resumed = await agent.open(store, session.id, create=False)
        assert (await resumed.send("still there?")).text == "fine"
    return session.id


@settings(
    max_examples=90,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples every run: CI is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(dialect=st.sampled_from(sorted(DIALECTS)), name=names, args=arguments)
def test_a_malformed_tool_call_ends_as_a_tool_error_and_the_session_goes_on(
    tmp_path_factory: Any, dialect: str, name: str, args: str
) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    asyncio.run(_survives(tmp, dialect, name, args))


async def test_the_call_comes_back_to_the_model_as_an_error_result() -> None:
    clock = FrozenClock()
    deep = '{"text": ' + "[" * 3000 + "]" * 3000 + "}"
    agent = _agent("openai_responses", Malformed("read_file", deep), clock)
    session = agent.session()
    await session.send("go")
    (result,) = session.history[2].tool_results  # type: ignore[union-attr]
    assert result.is_error
    assert "nested too deeply" in result.content


async def test_imported_malformed_calls_render_for_anthropic() -> None:
    # A history made on another dialect (or streamed and cut short) can hold arguments no
    # parser reads; Anthropic needs an object there, and still gets one.
    clock = FrozenClock()
    bad = ['{"text": ' + "[" * 3000 + "]" * 3000 + "}", '{"text": ' + "9" * 5000 + "}", "{"]
    history: list[Message] = [UserMessage(content=(TextBlock(text="start"),))]
    for i, args in enumerate(bad):
        call = ToolUseBlock(id=f"toolu_{i}", name="read_file", input_json=args)
        error = ToolResultBlock(tool_use_id=call.id, content="unreadable", is_error=True)
        history += [AssistantMessage(content=(call,)), tool_results([error])]
    agent = _agent("anthropic", Malformed("read_file", "{}"), clock)
    session = agent.session(history=history)
    assert (await session.send("carry on")).text == "fine"
    sent = agent.provider.requests[-1]["messages"]  # type: ignore[attr-defined]
    assert [m["content"][0]["input"] for m in sent[1:7:2]] == [{}, {}, {}]


SCRIPT = """
import asyncio
from stoker.clock import FrozenClock
from stoker.store.sqlite import SQLiteStore
from tests.test_model_output_fuzz import Malformed, _agent

async def main():
    for db, dialect, sid in {sessions!r}:
        async with SQLiteStore(db) as store:
            agent = _agent(dialect, Malformed("x", "{{}}"), FrozenClock())
            session = await agent.open(store, sid, create=False)
            result = await session.send("after the restart")
            assert result.text == "fine", result.text
    print("resumed", len({sessions!r}))

asyncio.run(main())
"""


async def test_malformed_histories_resume_in_a_new_process(tmp_path: Path) -> None:
    cases = [
        ("read_file", '{"text": ' + "[" * 2500 + "]" * 2500 + "}"),
        ("read_file", '{"text": ' + "8" * 5000 + "}"),
        ("read_file", '{"text": "\\ud800"}'),
        ("read\ud800file", "\ud800"),
        ("", "not json"),
    ]
    sessions = []
    for dialect in sorted(DIALECTS):
        for name, args in cases:
            sub = tmp_path / f"{dialect}-{len(sessions)}"
            sub.mkdir()
            sid = await _survives(sub, dialect, name, args)
            sessions.append((str(sub / "fuzz.db"), dialect, sid))
    out = await run_python("-c", SCRIPT.format(sessions=sessions), seconds=120)
    assert out.strip() == f"resumed {len(sessions)}"
