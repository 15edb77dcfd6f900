"""The recipes of docs/frameworks.md, each a real framework (or SDK) driven through
`stoker.http_client()` against the simulator: a conversation of two questions, each
answered after a tool call, under a system prompt long enough to be cached.

Audit mode sends every request byte for byte as a plain `httpx2` client does (the same
conversation, on a simulator of its own) and records every call in one lineage; optimize
mode reads the cache from the second call on. The recipes run as the page shows them
(tests/framework_helpers.py), so a recipe that stops working fails here.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import httpx2
import pytest
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled
from agents.models import _openai_shared
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI

from stoker.proxy.in_process import http_client
from tests.framework_helpers import drive, example, simulator


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    heading: str
    index: int = 0  # the n-th python block under the heading
    anthropic: bool  # Messages: no call asks for caching, so audit finds no breakpoint

    @property
    def audited(self) -> list[str]:
        """What audit mode finds on the four calls: on Anthropic, that none of them asked
        for caching (nothing written, nothing read); on OpenAI, whose cache needs no
        marker, the second and later calls reading the first one's prefix."""
        return ["no_breakpoint"] * 4 if self.anthropic else ["first", "hit", "hit", "hit"]


RECIPES = {
    "anthropic-sync": Recipe(heading="## The `anthropic` SDK", anthropic=True),
    "anthropic-async": Recipe(heading="## The `anthropic` SDK", index=1, anthropic=True),
    "openai-chat-sync": Recipe(heading="## The `openai` SDK", anthropic=False),
    "openai-responses-async": Recipe(heading="## The `openai` SDK", index=1, anthropic=False),
    "pydantic-ai-anthropic-async": Recipe(heading="## pydantic-ai", anthropic=True),
    "pydantic-ai-openai-async": Recipe(heading="## pydantic-ai", index=1, anthropic=False),
    "langgraph-chatopenai-sync": Recipe(heading="## LangChain and LangGraph", anthropic=False),
    "langgraph-chatanthropic-async": Recipe(
        heading="## LangChain and LangGraph", index=1, anthropic=True
    ),
    "openai-agents-async": Recipe(heading="## openai-agents", anthropic=False),
    "smolagents-sync": Recipe(heading="## smolagents", anthropic=False),
}


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """openai-agents exports its traces to OpenAI's servers by default: not from a test."""
    set_tracing_disabled(True)


@pytest.mark.parametrize("name", RECIPES)
def test_audit_sends_a_plain_clients_bytes_and_records_each_call_in_one_lineage(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = RECIPES[name]
    converse = example(recipe.heading, recipe.index)["converse"]
    audited = drive(converse, monkeypatch, tmp_path / "stoker.db")
    plain = drive(converse, monkeypatch, None)

    assert len(audited.sent) == 4  # two questions, each a tool call and an answer
    assert audited.sent == plain.sent  # method, path, headers and body of every request
    assert audited.answers == plain.answers
    (calls,) = audited.lineages
    assert [x.mode for x in calls] == ["audit"] * 4
    assert [x.rewrites for x in calls] == [()] * 4
    assert audited.verdicts == [recipe.audited]


@pytest.mark.parametrize("name", RECIPES)
def test_optimize_reads_the_cache_from_the_second_call_on(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = RECIPES[name]
    converse = example(recipe.heading, recipe.index)["converse"]
    optimized = drive(converse, monkeypatch, tmp_path / "stoker.db", optimize=True)

    assert len(optimized.sent) == 4
    assert optimized.verdicts == [["first", "hit", "hit", "hit"]]
    (calls,) = optimized.lineages
    usage = [x.record.usage for x in calls if x.record is not None]
    # each call reads what the call before it sent (OpenAI caches in steps of 128 tokens)
    assert all(u.read >= 0.9 * before.input_total for before, u in pairwise(usage)), usage
    marker = "added breakpoint tools+system" if recipe.anthropic else "set prompt_cache_key"
    assert all(any(r.startswith(marker) for r in x.rewrites) for x in calls), calls[0].rewrites


async def test_an_async_client_closes_at_once_while_it_keeps_a_conversation_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the async recipes end: the last call recorded (keep-warm now watches the
    conversation, on the real clock: its first ping minutes away), then closed."""
    converse = example(RECIPES["anthropic-async"].heading, 1)["converse"]
    with simulator(monkeypatch):
        http = http_client(optimize=True, db=tmp_path / "stoker.db")
        await converse(http)
        last = await http.recorded()
        assert last is not None
        assert last.record is not None
        assert last.record.explanation.verdict == "hit"
        began = time.perf_counter()
        async with asyncio.timeout(10):  # in this task, as a user's code awaits it
            await http.aclose()
        assert time.perf_counter() - began < 5  # (the timeout's cancel can be swallowed too)


@pytest.mark.parametrize("side", ["ChatAnthropic.invoke", "ChatOpenAI.ainvoke"])
def test_each_langchain_model_takes_stokers_client_on_its_other_side_too(
    side: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LangGraph recipes run ChatOpenAI synchronously and ChatAnthropic asynchronously;
    the other side goes through Stoker the way the page says: `over` with a sync client
    for ChatAnthropic's `invoke`, `http_async_client=` for ChatOpenAI's `ainvoke`."""
    recipe = example(RECIPES["langgraph-chatanthropic-async"].heading, 1)
    tools = [recipe["weather"]]
    question = [SystemMessage(recipe["SYSTEM"]), HumanMessage("What is the weather in Paris?")]

    def invoke(http: httpx2.Client) -> list[str]:
        llm = ChatAnthropic(model_name="claude-sonnet-4-6", timeout=None, stop=None)
        reply = recipe["over"](http, llm).bind_tools(tools).invoke(question)
        return [call["name"] for call in reply.tool_calls]

    async def ainvoke(http: httpx2.AsyncClient) -> list[str]:
        llm = ChatOpenAI(model="gpt-4.1", http_async_client=http).bind_tools(tools)
        reply = await llm.ainvoke(question)
        return [call["name"] for call in reply.tool_calls]

    converse = invoke if side == "ChatAnthropic.invoke" else ainvoke
    audited = drive(converse, monkeypatch, tmp_path / "stoker.db")
    plain = drive(converse, monkeypatch, None)
    assert audited.answers == plain.answers == ["weather"]
    assert audited.sent == plain.sent
    assert len(audited.sent) == 1
    assert audited.verdicts == [["no_breakpoint" if side.startswith("ChatAnthropic") else "first"]]


def test_openai_agents_default_client_over_stoker_serves_an_agent_with_no_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other way the page names: the default client, for agents given a model name."""
    recipe = example(RECIPES["openai-agents-async"].heading)
    monkeypatch.setattr(_openai_shared, "_default_openai_client", None)  # put back after

    async def converse(http: httpx2.AsyncClient) -> list[str]:
        set_default_openai_client(AsyncOpenAI(http_client=http))
        tools = [recipe["weather"]]
        agent = Agent(name="reviewer", instructions=recipe["SYSTEM"], model="gpt-4.1", tools=tools)
        result = await Runner.run(agent, "What is the weather forecast in Paris?")
        return [str(result.final_output)]

    optimized = drive(converse, monkeypatch, tmp_path / "stoker.db", optimize=True)
    assert len(optimized.sent) == 2
    assert optimized.verdicts == [["first", "hit"]]
