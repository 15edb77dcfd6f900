"""The agent loop on the simulator: turns, tools, policies, forks, and what they send."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from stoker.agent.agent import Agent
from stoker.agent.seams import Callbacks
from stoker.agent.starts import Rebase
from stoker.cache.record import build_record, notify
from stoker.clock import FrozenClock
from stoker.errors import ConfigError
from stoker.providers.sim.model import Call, ScriptedModel
from stoker.testing import assert_no_undeclared_breaks
from stoker.tools import DispatchPolicy
from stoker.wire.blocks import TextBlock, ToolUseBlock
from stoker.wire.fingerprint import EMPTY_CHAIN
from stoker.wire.messages import AssistantMessage, UserMessage, user_text
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from stoker.wire.usage import Usage
from tests.helpers import make_registry, sim_agent, without_markers


def _sent(payload: dict) -> tuple[str, str]:  # type: ignore[type-arg]
    """The tools and system of a payload as the exact JSON text a provider receives (cache
    markers aside: they are not part of the cached content)."""
    return json.dumps(without_markers(payload.get("tools"))), json.dumps(
        without_markers(payload.get("system"))
    )


async def test_turn_calls_a_tool_then_answers() -> None:
    calls: list[str] = []
    agent, provider = sim_agent(registry=make_registry(calls))
    session = agent.session()
    result = await session.send("please read_file 'notes.md'")
    assert result.exit == "answered"
    assert calls == ["read_file"]
    assert [m.role for m in session.history] == ["user", "assistant", "user", "assistant"]
    assert result.text.startswith("Done. Tool results: read_file ok: notes.md")
    assert len(provider.requests) == 2


async def test_every_call_after_the_first_reads_at_least_90_percent() -> None:
    agent, _ = sim_agent(registry=make_registry())
    session = agent.session()
    for text in ("read_file 'a.md'", "list_files now", "thanks", "read_file 'b.md'"):
        await session.send(text)
    ratios = [r.usage.hit_ratio for r in session.records]
    assert ratios[0] == 0.0
    assert min(ratios[1:]) >= 0.9, ratios
    assert all(r.explanation.verdict == "hit" for r in session.records[1:])


@pytest.mark.parametrize(
    ("toolsets", "disabled"),
    [(None, ()), (("files",), ()), (("files", "memory", "shell"), ()), (None, ("shell",))],
    ids=["default", "narrowed", "widened", "disabled"],
)
async def test_fork_sends_parent_tools_and_system_byte_identical(
    toolsets: tuple[str, ...] | None, disabled: tuple[str, ...]
) -> None:
    agent, provider = sim_agent(
        registry=make_registry(), toolsets=toolsets, disabled_toolsets=disabled
    )
    session = agent.session()
    await session.send("read_file 'plan.md'")
    parent_last = provider.requests[-1]
    parent_usage = session.records[-1].usage
    fork = session.fork(policy=DispatchPolicy(allowed=frozenset({"memory_add"})), role="review")
    result = await fork.send("Review: anything to remember?")
    fork_first = provider.requests[len(provider.requests) - len(result.records)]
    assert _sent(fork_first) == _sent(parent_last)
    assert {k: v for k, v in fork_first.items() if k not in ("messages", "tools", "system")} == {
        k: v for k, v in parent_last.items() if k not in ("messages", "tools", "system")
    }
    assert result.records[0].usage.read == parent_usage.read + parent_usage.written


async def test_fork_cannot_call_a_tool_outside_its_policy() -> None:
    calls: list[str] = []
    model = ScriptedModel(
        ["ok", Call(name="run_shell", arguments={"text": "rm -rf /"}), "denied, fine"]
    )
    agent, _ = sim_agent(model=model, registry=make_registry(calls))
    session = agent.session()
    await session.send("hello")
    fork = session.fork(policy=DispatchPolicy(allowed=frozenset({"memory_add"})))
    result = await fork.send("review")
    assert calls == []
    denial = fork.history[-2]
    assert isinstance(denial, UserMessage)
    assert denial.tool_results[0].is_error
    assert denial.tool_results[0].content.startswith("tool run_shell is not allowed in this run")
    assert result.text == "denied, fine"
    model.assert_complete()


async def test_fork_never_widens_the_parent_policy() -> None:
    calls: list[str] = []
    model = ScriptedModel([Call(name="run_shell", arguments={"text": "ls"}), "refused"])
    agent, _ = sim_agent(model=model, registry=make_registry(calls))
    narrow = agent.session().fork(policy=DispatchPolicy(allowed=frozenset({"read_file"})))
    wider = narrow.fork(policy=DispatchPolicy(allowed=frozenset({"read_file", "run_shell"})))
    await wider.send("list the files")
    assert calls == []
    denial = wider.history[-2]
    assert isinstance(denial, UserMessage)
    assert denial.tool_results[0].content.startswith("tool run_shell is not allowed")


async def test_fork_leaves_the_parent_history_untouched() -> None:
    agent, _ = sim_agent(registry=make_registry())
    session = agent.session()
    await session.send("hello")
    before = session.history
    await session.fork().send("summarise")
    assert session.history == before
    assert session.prefix is session.fork().prefix


async def test_fork_with_rebase_records_a_declared_break() -> None:
    agent, provider = sim_agent(registry=make_registry())
    session = agent.session()
    await session.send("hello")
    fork = session.fork(
        rebase=Rebase(reason="review on a smaller system prompt", system="Be brief.")
    )
    result = await fork.send("cheap review")
    assert fork.prefix.system == "Be brief."
    assert session.prefix.system != "Be brief."
    assert result.records[0].explanation.verdict == "declared"
    assert result.records[0].declared_break == "review on a smaller system prompt"
    assert provider.requests[-1]["system"][0]["text"] == "Be brief."


async def test_system_prompt_identical_for_sessions_created_a_minute_apart() -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(clock=clock, registry=make_registry())
    first = agent.session()
    clock.advance(minutes=1)
    second = agent.session()
    assert first.prefix.system == second.prefix.system
    assert first.prefix.to_json() == second.prefix.to_json()
    assert "Today's date: 2026-09-21." in first.prefix.system


async def test_thinking_blocks_are_replayed_verbatim() -> None:
    agent, provider = sim_agent(registry=make_registry(), thinking_budget=2048)
    session = agent.session()
    await session.send("hello")
    await session.send("again")
    first_reply = provider.requests[1]["messages"][1]["content"]
    assert first_reply[0]["type"] == "thinking"
    stored = session.history[1].content[0]
    assert first_reply[0] == {
        "type": "thinking",
        "thinking": stored.thinking,
        "signature": stored.signature,
    }
    assert len(stored.signature) == 64
    assert provider.requests[1]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert session.records[-1].explanation.verdict == "hit"


async def test_callbacks_are_swapped_between_turns() -> None:
    agent, _ = sim_agent(registry=make_registry())
    session = agent.session()
    seen_a: list[str] = []
    seen_b: list[str] = []
    await session.send("hello", callbacks=Callbacks(on_text=seen_a.append))
    await session.send("again", callbacks=Callbacks(on_text=seen_b.append))
    assert seen_a == ["Understood: hello"]
    assert seen_b == ["Understood: again"]


async def test_budget_exhaustion_is_a_value_not_an_exception() -> None:
    model = ScriptedModel([Call(name="read_file", arguments={"text": "a"})] * 2)
    agent, _ = sim_agent(model=model, registry=make_registry(), max_iterations=2)
    result = await agent.session().send("loop")
    assert (result.exit, result.iterations, result.text) == ("budget_exhausted", 2, "")


async def test_malformed_arguments_come_back_as_a_tool_error() -> None:
    def bad_call(request):  # type: ignore[no-untyped-def]
        return (ToolUseBlock(id="toolu_bad", name="read_file", input_json='{"text": '),)

    model = ScriptedModel([bad_call, "sorry"])
    calls: list[str] = []
    # OpenAI carries arguments as a string, so a model can send invalid JSON there.
    agent, _ = sim_agent(model=model, registry=make_registry(calls), llm="gpt-5.6")
    session = agent.session()
    result = await session.send("go")
    assert result.text == "sorry"
    assert calls == []
    error = session.history[2].tool_results[0]
    assert error.is_error
    assert "not valid JSON" in error.content


async def test_volatile_note_goes_into_the_user_message_not_the_prefix() -> None:
    agent, provider = sim_agent(registry=make_registry())
    session = agent.session()
    await session.send("hello", note="Current time: 14:13:20")
    await session.send("again", note="Current time: 14:14:02")
    assert "14:13" not in session.prefix.system
    assert provider.requests[-1]["messages"][0]["content"][1]["text"] == "Current time: 14:13:20"
    assert session.records[-1].explanation.verdict == "hit"


@pytest.mark.breaks_cache(reason="proves the suite-wide check sees an undeclared break")
async def test_an_undeclared_prefix_change_is_caught(
    recorded_calls: list[CacheRecord],
) -> None:
    # A session cannot move its prefix without rebase(); a buggy caller building its own
    # requests can, and the records of those calls are what the check looks at.
    agent, _ = sim_agent(registry=make_registry())
    before = Request(prefix=agent.build_prefix(), messages=(user_text("hello"),))
    after = replace(before, prefix=before.prefix.with_params(tool_choice="any"))
    record = build_record(
        session_id="s",
        seq=1,
        role="main",
        provider="sim",
        info=agent.info,
        request=after,
        previous=before,
        previous_started_at=0.0,
        started_at=1.0,
        usage=Usage(written_5m=3000),
        history=EMPTY_CHAIN,
        new_from=0,
    )
    notify(record)
    assert record.explanation.slot == "params.tool_choice"
    with pytest.raises(AssertionError, match="1 undeclared cache break"):
        assert_no_undeclared_breaks(recorded_calls)


def test_a_session_has_no_settable_state() -> None:
    agent, _ = sim_agent(registry=make_registry())
    session = agent.session()
    for name in ("prefix", "history", "agent", "id", "records"):
        with pytest.raises(AttributeError):
            setattr(session, name, None)
    with pytest.raises(AttributeError):
        session.policy = None  # type: ignore[attr-defined]


async def test_history_is_immutable_values() -> None:
    agent, _ = sim_agent(registry=make_registry())
    session = agent.session()
    await session.send("hello")
    reply = session.history[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.content == (TextBlock(text="Understood: hello"),)


async def test_tools_take_loose_tools_and_toolsets_alike_and_agents_close_with_async_with() -> None:
    registry = make_registry()
    files = registry.get("files")
    async with Agent("sim:claude-sonnet-4-6", tools=[files, *registry.get("shell").tools]) as agent:
        assert [t.name for t in agent.resolved_tools()] == ["list_files", "read_file", "run_shell"]
        assert agent.model == "claude-sonnet-4-6"
        assert agent.provider.name == "sim"


def test_an_agent_without_a_provider_says_how_to_name_one() -> None:
    with pytest.raises(ConfigError, match="'sim:claude-sonnet-4-6'"):
        Agent("claude-sonnet-4-6")


@pytest.mark.parametrize("budget", [512, 4096, 8000])
def test_a_thinking_budget_the_provider_would_refuse_fails_when_the_agent_is_made(
    budget: int,
) -> None:
    with pytest.raises(ConfigError, match="thinking budget must be at least 1,024"):
        Agent("sim:claude-sonnet-4-6", thinking_budget=budget, max_tokens=4096)
    assert Agent("sim:claude-sonnet-4-6", thinking_budget=1024, max_tokens=4096).thinking_budget
