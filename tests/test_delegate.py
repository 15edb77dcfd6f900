"""Sub-agents share the parent's cache; spawn depth is capped and never leaks."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from stoker.agent.delegate import DelegateConfig, delegate_tool, spawn_depth
from stoker.providers.base import ProviderWrapper
from stoker.providers.sim.model import tool_call
from stoker.tools import tool
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.events import CacheRecorded, MemorySink
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from tests.helpers import make_registry, sim_agent, without_markers


@tool
def probe_depth() -> str:
    """Report the current spawn depth."""
    return f"depth={spawn_depth()}"


class DelegatingModel:
    """Delegates (`fan` calls at once) when the newest text says "delegate", probes its
    depth when it says "probe", answers with the tool results otherwise."""

    def __init__(self, fan: int = 1, fail_children: bool = False) -> None:
        self.fan = fan
        self.fail_children = fail_children

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        if not last.text:
            return (TextBlock(text="done: " + " | ".join(r.content for r in last.tool_results)),)
        if self.fail_children and "sub-agent" in last.text:
            raise RuntimeError("the child's model broke")
        if "delegate" in last.text:
            return tuple(
                tool_call(request, "delegate", {"goal": f"delegate further, part {i}"}, i)
                for i in range(self.fan)
            )
        if "probe" in last.text:
            return (tool_call(request, "probe_depth", {}),)
        return (TextBlock(text="child answer"),)


def _agent(model: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
    return sim_agent(
        model=model,
        registry=make_registry(),
        tools=[delegate_tool(DelegateConfig(**kwargs)), probe_depth],
    )


def _sent(payload: dict[str, Any]) -> tuple[str, str]:
    return json.dumps(without_markers(payload["tools"])), json.dumps(
        without_markers(payload["system"])
    )


async def test_child_first_request_sends_parent_tools_and_system_and_reads_them() -> None:
    agent, provider = _agent(DelegatingModel(), max_depth=1)
    sink = MemorySink()
    session = agent.session(store=sink)
    await session.send("warm up")
    parent_last = provider.requests[-1]
    parent_usage = session.records[-1].usage
    await session.send("please delegate this")
    child_first = provider.requests[2]
    assert "You are a sub-agent" in child_first["messages"][-1]["content"][-1]["text"]
    assert _sent(child_first) == _sent(parent_last)
    child_records = [r for r in _recorded(sink) if r.role == "subagent"]
    assert child_records[0].usage.read >= parent_usage.read + parent_usage.written


def _recorded(sink: MemorySink) -> list[CacheRecord]:
    return [e.record for e in sink.events if isinstance(e, CacheRecorded)]


async def test_three_parallel_children_all_read_the_parents_prefix() -> None:
    agent, _ = _agent(DelegatingModel(fan=3), max_depth=1)
    sink = MemorySink()
    session = agent.session(store=sink)
    await session.send("warm up")
    parent_usage = session.records[-1].usage
    result = await session.send("delegate three ways")
    children = [r for r in _recorded(sink) if r.role == "subagent"]
    assert len(children) == 6  # each child: a refused delegation, then its answer
    firsts = {r.session_id: r for r in reversed(children)}
    assert len(firsts) == 3
    assert all(r.usage.read >= parent_usage.read + parent_usage.written for r in firsts.values())
    assert result.text.startswith("done: done: ")
    assert result.text.count("cannot start a sub-agent at depth 2: the limit is 1") == 9


async def test_depth_three_succeeds_and_depth_four_fails_before_any_provider_call() -> None:
    agent, provider = _agent(DelegatingModel(), max_depth=3)
    sink = MemorySink()
    session = agent.session(store=sink)
    result = await session.send("delegate")
    # root, depth 1, 2, 3: two calls each; the refused depth-4 child made none
    assert len(provider.requests) == 8
    lineages = {r.session_id for r in _recorded(sink)}
    assert len(lineages) == 4
    assert "cannot start a sub-agent at depth 4: the limit is 3" in result.text


async def test_depth_is_restored_after_a_child_raises_and_concurrent_children_see_their_own() -> (
    None
):
    agent, _ = _agent(DelegatingModel(fan=2, fail_children=True), max_depth=3)
    sink = MemorySink()
    session = agent.session(store=sink)
    result = await session.send("delegate")
    assert result.text.count("failed: RuntimeError: the child's model broke") == 2
    assert spawn_depth() == 0
    probe = await session.send("probe")
    assert probe.text == "done: depth=0"


async def test_children_probe_their_own_depth() -> None:
    class ProbeInChild(DelegatingModel):
        def respond(self, request: Request) -> tuple[Block, ...]:
            last = request.messages[-1]
            if isinstance(last, UserMessage) and "sub-agent" in last.text:
                return (tool_call(request, "probe_depth", {}),)
            return super().respond(request)

    agent, _ = _agent(ProbeInChild(fan=2), max_depth=3)
    result = await agent.session().send("delegate")
    assert result.text == "done: done: depth=1 | done: depth=1"


class _Logging(ProviderWrapper):
    """Wraps a provider and logs when each lineage's calls start and end."""

    def __init__(self, inner: Any, log: list[tuple[str, str]]) -> None:
        super().__init__(inner)
        self.log = log

    async def complete(self, request: Any, context: Any) -> Any:
        self.log.append(("start", context.session_id))
        try:
            return await self.inner.complete(request, context)
        finally:
            self.log.append(("end", context.session_id))


async def test_parallel_siblings_wait_for_the_first_childs_response() -> None:
    agent, provider = _agent(DelegatingModel(fan=3), max_depth=1)
    provider.latency = 0.02
    log: list[tuple[str, str]] = []
    agent = dataclasses.replace(agent, provider=_Logging(provider, log))
    await agent.session().send("delegate three ways")
    children = [lineage for kind, lineage in log if kind == "start" and ".subagent-" in lineage]
    first_child = children[0]
    first_end = log.index(("end", first_child))
    siblings = [c for c in dict.fromkeys(children) if c != first_child]
    assert len(siblings) == 2
    for sibling in siblings:
        assert log.index(("start", sibling)) > first_end, log
