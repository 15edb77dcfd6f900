"""A provider cannot use its payload to change the prefix.

A rendered payload is built from the lineage's render memo, which every later turn, fork
and sub-agent reuses. A provider (or an SDK) that edits its payload in place (adds a
tool, rewrites the system prompt, appends a message, pops a key in a content block) must
change nothing but its own copy: every later request is the same as a well-behaved
provider's, and the simulator accounts for what was actually sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.agent.agent import Agent
from stoker.agent.delegate import DelegateConfig, delegate_tool
from stoker.cache.record import observe_records
from stoker.clock import FrozenClock
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import tool_call
from stoker.providers.sim.provider import SimProvider
from stoker.wire.blocks import Block, ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.dialects import DIALECTS, dialect_module
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Breakpoint, Request
from tests.helpers import SYSTEM, make_registry

ROUTES = {  # dialect: model, the simulator's OpenAI API
    "anthropic": ("claude-sonnet-4-6", "openai_responses"),
    "openai_responses": ("gpt-5.6", "openai_responses"),
    "openai_chat": ("gpt-5.6", "openai_chat"),
}


class Tasks:
    """Reads a file on READ, delegates on DELEGATE, answers tool results in text."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        if last.tool_results and not last.text:
            return (TextBlock(text="done: " + " | ".join(r.content for r in last.tool_results)),)
        if "DELEGATE" in last.text:
            return (tool_call(request, "delegate", {"goal": "READ child.md"}),)
        if "READ" in last.text:
            return (tool_call(request, "read_file", {"text": "plan.md"}),)
        return (TextBlock(text="noted"),)


def containers(payload: Any) -> list[Any]:
    """Every dict and list in `payload`, found before any of them is changed."""
    found, stack = [], [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict | list):
            found.append(value)
            stack.extend(value.values() if isinstance(value, dict) else value)
    return found


def vandalize(payload: dict[str, Any]) -> None:
    """Change everything: a tool more, every string edited, a key popped from and a key
    added to every dict, an item appended to every list."""
    payload.setdefault("tools", []).append({"name": "vandal", "input_schema": {}})
    for value in containers(payload):
        if isinstance(value, dict):
            for key, item in list(value.items()):
                if isinstance(item, str):
                    value[key] = item + " (edited)"
            if value:
                value.pop(next(iter(value)))
            value["vandal"] = ["was here"]
        else:
            value.append({"type": "text", "text": "vandal"})


class Recording(ProviderWrapper):
    """The simulator, keeping per call the payload a provider renders for itself and the
    one the simulator was sent, as bytes taken before anyone could change them."""

    def __init__(self, sim: SimProvider) -> None:
        super().__init__(sim)
        self.sim = sim
        self.rendered: list[str] = []
        self.sent: list[str] = []

    async def complete(self, request: Request, context: CallContext) -> Completion:
        dialect = self.sim.dialect_for(request.prefix.params.model)
        payload = dialect_module(dialect).render_request(request)
        self.rendered.append(json.dumps(payload))
        self.handle(payload)
        completion = await self.sim.complete(request, context)
        self.sent.append(json.dumps(self.sim.requests[-1]))
        self.handle(payload)  # after sending too: an SDK or a retry layer may edit in place
        self.handle(self.sim.requests[-1])
        return completion

    def handle(self, payload: dict[str, Any]) -> None:
        """What the provider does with a payload it holds: nothing."""


class Vandal(Recording):
    def handle(self, payload: dict[str, Any]) -> None:
        vandalize(payload)


class Tinkerer(Recording):
    """Edits that leave a valid payload, so nothing would fail loudly: a tool more (once),
    the system text and an old message's text changed."""

    def handle(self, payload: dict[str, Any]) -> None:
        history = payload.get("messages") or payload["input"]
        if "extra" in json.dumps(payload["tools"]):
            payload["tools"].pop()
        if "system" in payload:  # Anthropic
            payload["tools"].append({"name": "extra", "input_schema": {"type": "object"}})
            payload["system"][0]["text"] += " Today is Tuesday."
            history[0]["content"][0]["text"] += " (edited)"
        else:
            tool = {"type": "function", "name": "extra", "parameters": {"type": "object"}}
            if "messages" in payload:  # Chat nests the function
                tool = {"type": "function", "function": {"name": "extra"}}
            payload["tools"].append(tool)
            history[0]["content"] += " Today is Tuesday."
            history[1]["content"] += " (edited)"


async def _run(dialect: str, provider_type: type[Recording]) -> tuple[Recording, list[Any]]:
    model, api = ROUTES[dialect]
    clock = FrozenClock()
    sim = SimProvider(engine=SimEngine(model=Tasks()), clock=clock, openai_api=api)
    provider = provider_type(sim)
    agent = Agent(
        provider=provider,
        model=model,
        clock=clock,
        system=SYSTEM,
        registry=make_registry(),
        tools=[delegate_tool(DelegateConfig(max_depth=1))],
    )
    records: list[CacheRecord] = []
    with observe_records(records.append):
        session = agent.session(session_id="isolated")
        await session.send("READ plan.md")
        clock.advance(30)
        answer = await session.send("please DELEGATE")
        assert answer.text == "done: done: read_file ok: plan.md"  # the child read it
        clock.advance(30)
        await session.fork(role="review").send("READ notes.md")
        clock.advance(30)
        await session.send("READ again")
        await session.send("thanks")
    assert {r.role for r in records} == {"main", "subagent", "review"}
    return provider, [(r.role, r.explanation.verdict, r.usage) for r in records]


@pytest.mark.parametrize("provider_type", [Vandal, Tinkerer])
@pytest.mark.parametrize("dialect", sorted(ROUTES))
async def test_a_provider_that_mutates_everything_changes_no_later_request(
    dialect: str, provider_type: type[Recording]
) -> None:
    polite, polite_records = await _run(dialect, Recording)
    vandal, vandal_records = await _run(dialect, provider_type)
    assert vandal.rendered == polite.rendered
    assert vandal.sent == polite.sent
    assert vandal_records == polite_records
    assert [(role, verdict) for role, verdict, _ in vandal_records][1:] == [
        (role, "hit") for role, _, _ in vandal_records[1:]
    ]
    # What a provider renders for itself is what the simulator was sent, marker for marker.
    assert vandal.rendered == vandal.sent


IMAGE = ImageBlock(media_type="image/png", data="iVBORw0KGgo=")


def _conversation(dialect: str, turns: int) -> list[Request]:
    """Requests of one lineage sharing a render memo, each one turn longer, with a tool call,
    a tool result, an image and breakpoints on tools+system and on the newest block."""
    model = ROUTES[dialect][0]
    tool = json.dumps(
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ).encode()
    prefix = Prefix(params=CacheParams(model=model), tools=(tool,), system=SYSTEM)
    memo: dict[str, Any] = {}
    messages: list[Message] = []
    requests = []
    for i in range(turns):
        call = ToolUseBlock(id=f"call_{i}", name="read_file", input_json='{"path": ["a", {}]}')
        messages += [
            UserMessage(content=(TextBlock(text=f"question {i}"), IMAGE)),
            AssistantMessage(content=(TextBlock(text="let me look"), call)),
            UserMessage(content=(ToolResultBlock(tool_use_id=call.id, content=f"file {i}"),)),
        ]
        requests.append(
            Request(
                prefix=prefix,
                messages=tuple(messages),
                breakpoints=(Breakpoint(ttl="1h"), Breakpoint(message=len(messages) - 1)),
                render_memo=memo,
            )
        )
    return requests


def _mutate(data: st.DataObject, payload: dict[str, Any]) -> None:
    """One random change at one random place in `payload`."""
    target = data.draw(st.sampled_from(containers(payload)))
    if isinstance(target, list):
        how = data.draw(st.sampled_from(["append", "pop", "clear", "replace", "reverse"]))
        if how == "append":
            target.append({"type": "text", "text": "injected"})
        elif how == "pop" and target:
            target.pop(data.draw(st.integers(0, len(target) - 1)))
        elif how == "clear":
            target.clear()
        elif how == "replace" and target:
            target[data.draw(st.integers(0, len(target) - 1))] = "replaced"
        else:
            target.reverse()
    else:
        how = data.draw(st.sampled_from(["set", "pop", "clear", "edit"]))
        keys = sorted(target)
        if how == "set" or not keys:
            target[data.draw(st.sampled_from([*keys, "new"]))] = {"injected": [1]}
        elif how == "pop":
            target.pop(data.draw(st.sampled_from(keys)))
        elif how == "clear":
            target.clear()
        else:
            key = data.draw(st.sampled_from(keys))
            target[key] = f"{target[key]}!" if isinstance(target[key], str) else None


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(dialect=st.sampled_from(DIALECTS), data=st.data())
def test_any_change_to_a_rendered_payload_stays_in_it(dialect: str, data: st.DataObject) -> None:
    module = dialect_module(dialect)
    expected = [json.dumps(module.render_request(r)) for r in _conversation(dialect, 3)]
    requests = _conversation(dialect, 3)
    for request, bytes_ in zip(requests, expected, strict=True):
        payload = module.render_request(request)
        assert json.dumps(payload) == bytes_
        for _ in range(data.draw(st.integers(1, 5))):
            _mutate(data, payload)
        assert json.dumps(module.render_request(request)) == bytes_  # the same request again


def _first_user_text_edited(dialect: str, payload: dict[str, Any]) -> None:
    history = payload["input" if dialect == "openai_responses" else "messages"]
    message = next(m for m in history if m.get("role") == "user")
    if isinstance(message["content"], str):
        message["content"] += " (edited)"
    else:
        message["content"][0]["text"] += " (edited)"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_accountant_sees_a_changed_copy_by_content(dialect: str) -> None:
    # A provider may send its changed copy on to the simulator, even vouching that it will
    # not change it further (`trusted`). The accountant knows the previous call's blocks
    # by identity; it must account what the copy holds, as it would over HTTP.
    first, second = _conversation(dialect, 2)
    module = dialect_module(dialect)
    usages = {}
    for how in ("unchanged", "changed in process", "changed over HTTP"):
        engine = SimEngine(model=Tasks())
        engine.handle(dialect, module.render_request(first, shared=True), at=0.0, trusted=True)
        payload = module.render_request(second)
        if how != "unchanged":
            _first_user_text_edited(dialect, payload)
        if how == "changed over HTTP":
            payload = json.loads(json.dumps(payload))
        trusted = how != "changed over HTTP"
        usages[how] = engine.handle(dialect, payload, at=1.0, trusted=trusted).usage
    assert usages["changed in process"] == usages["changed over HTTP"]
    assert usages["changed in process"].read < usages["unchanged"].read


async def test_the_simulators_kept_requests_are_copies() -> None:
    sim = SimProvider(engine=SimEngine(model=Tasks()), clock=FrozenClock())
    (request,) = _conversation("anthropic", 1)
    await sim.complete(request, CallContext(session_id="t"))
    vandalize(sim.requests[0])
    await sim.complete(request, CallContext(session_id="t"))
    assert "vandal" not in json.dumps(sim.requests[1])
    assert sim.outcomes[1].usage.read > 0
