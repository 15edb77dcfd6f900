"""The fallback chain on the simulator: a primary failing with 529 after its retries hands
the turn to the next entry as a declared break, and the next turn goes back to the primary
with the prefix it sent before, reading its own cache."""

from __future__ import annotations

from typing import Any

import pytest

from stoker import Agent
from stoker.agent.fallback import Route, sendable, transient, why
from stoker.clock import FrozenClock
from stoker.errors import AuthenticationError, InvalidRequest, ProviderError, ProviderTimeout
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.retry import RetryableError, RetryPolicy, call_with_retries
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.blocks import TextBlock, ThinkingBlock
from stoker.wire.messages import AssistantMessage, UserMessage
from stoker.wire.request import Request
from tests.helpers import SYSTEM, make_registry, without_markers


async def _no_wait(_seconds: float) -> None:
    return None


class Overloadable(ProviderWrapper):
    """The simulator behind a real retry loop: while `down`, every attempt is a 529."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.down = False
        self.refuse = False
        self.attempts = 0
        self.policy = RetryPolicy(max_retries=3, sleep=_no_wait)

    async def complete(self, request: Request, context: CallContext) -> Completion:
        async def attempt() -> Completion:
            self.attempts += 1
            if self.refuse:
                raise InvalidRequest("HTTP 400: bad request", provider="sim")
            if self.down:
                raise RetryableError("HTTP 529: Overloaded", status=529)
            return await self.inner.complete(request, context)

        completion, _ = await call_with_retries(attempt, policy=self.policy, provider="sim")
        return completion


def _chain(fallback_model: str, **kwargs: Any) -> tuple[Agent, Overloadable, SimProvider]:
    clock = FrozenClock()
    primary = Overloadable(SimProvider(engine=SimEngine(), clock=clock))
    backup = SimProvider(engine=SimEngine(), clock=clock)
    agent = Agent(
        "claude-sonnet-4-6",
        provider=primary,  # type: ignore[arg-type]
        registry=make_registry(),
        system=SYSTEM,
        clock=clock,
        fallbacks=[Route(provider=backup, model=fallback_model, spec=f"sim:{fallback_model}")],
        **kwargs,
    )
    return agent, primary, backup


async def test_a_529_turn_falls_back_and_the_next_turn_reads_the_primarys_cache() -> None:
    agent, primary, backup = _chain("claude-opus-4-6")
    session = agent.session()
    await session.send("hello there")
    await session.send("tell me more")
    before = primary.inner.requests[-1]
    primary.down = True
    detour = await session.send("and now?")
    assert primary.attempts == 2 + 4  # two good calls, then the first try and 3 retries
    (call,) = detour.records
    assert call.declared_break == (
        "fallback: claude-sonnet-4-6 overloaded (529 x4); continuing on sim:claude-opus-4-6"
    )
    assert call.explanation.verdict == "declared"
    assert call.model == "claude-opus-4-6"
    assert call.fallback_of == "claude-sonnet-4-6"
    assert call.cost_usd is not None
    # the fallback got the same tools, system and history, on its own model
    sent = backup.requests[-1]
    assert sent["model"] == "claude-opus-4-6"
    assert sent["tools"] == before["tools"]
    assert without_markers(sent["system"]) == without_markers(before["system"])
    assert without_markers(sent["messages"][: len(before["messages"])]) == without_markers(
        before["messages"]
    )
    primary.down = False
    back = await session.send("back to normal?")
    first = back.records[0]
    assert first.model == "claude-sonnet-4-6"
    assert first.fallback_of is None
    assert first.declared_break == "fallback over: back on claude-sonnet-4-6"
    restored = primary.inner.requests[-1]
    # byte for byte what it sent before the fallback, plus the messages since
    assert restored["model"] == before["model"]
    assert restored["tools"] == before["tools"]
    assert without_markers(restored["system"]) == without_markers(before["system"])
    head = len(before["messages"])
    assert without_markers(restored["messages"][:head]) == without_markers(before["messages"])
    assert [m["role"] for m in restored["messages"][head:]] == [
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # the messages since are the ones the fallback was sent, then its answer and the new ask
    detoured = len(sent["messages"])
    assert without_markers(restored["messages"][:detoured]) == without_markers(sent["messages"])
    answer, ask = without_markers(restored["messages"][detoured:])
    assert answer == {"role": "assistant", "content": [{"type": "text", "text": detour.text}]}
    assert "back to normal?" in str(ask["content"])
    # ... and it reads all it wrote before the outage
    last_good = session.records[1]
    assert first.usage.read == last_good.usage.read + last_good.usage.written
    # the fallback's answer stays in the history as it was sent
    assert session.history[-3].text == detour.text


async def test_the_primary_rests_for_the_cooldown_then_comes_back() -> None:
    agent, primary, _backup = _chain("claude-opus-4-6", fallback_cooldown=600)
    session = agent.session()
    await session.send("hello")
    primary.down = True
    await session.send("still there?")
    primary.down = False
    calls = primary.attempts
    rested = await session.send("one more")
    assert primary.attempts == calls  # not tried during the cool-down
    assert rested.records[0].model == "claude-opus-4-6"
    assert rested.records[0].declared_break is None  # the same route: no break
    agent.clock.advance(minutes=11)  # type: ignore[attr-defined]
    back = await session.send("and now")
    assert back.records[0].model == "claude-sonnet-4-6"


async def test_a_bad_request_never_falls_back() -> None:
    agent, primary, backup = _chain("claude-opus-4-6")
    session = agent.session()
    primary.refuse = True
    with pytest.raises(InvalidRequest):
        await session.send("hello")
    assert backup.requests == []


async def test_thinking_signed_by_one_provider_never_reaches_another() -> None:
    agent, primary, backup = _chain("gpt-5.6", thinking_budget=2048)
    session = agent.session()
    await session.send("think first")
    assert any(isinstance(b, ThinkingBlock) for b in session.history[1].content)
    primary.down = True
    detour = await session.send("and again")
    assert "1 thinking blocks another provider signed left out" in (
        detour.records[0].declared_break or ""
    )
    assert "reasoning" not in str(backup.requests[-1]["input"][:3])
    assert session.history[-1].origin == "openai"  # type: ignore[union-attr]
    primary.down = False
    await session.send("home again")
    home = primary.inner.requests[-1]["messages"]
    assert [b["type"] for b in home[3]["content"]] == ["text"]  # the OpenAI thinking is out
    assert home[1]["content"][0]["type"] == "thinking"  # its own thinking goes back


async def test_turns_and_keep_warm_never_send_another_providers_thinking() -> None:
    agent, primary, _backup = _chain("gpt-5.6", thinking_budget=2048)
    foreign = AssistantMessage(
        content=(ThinkingBlock(thinking="their reasoning", signature="enc"), TextBlock(text="ok")),
        origin="openai",
    )
    session = agent.session(history=[UserMessage(content=(TextBlock(text="earlier"),)), foreign])
    await session.send("go on")
    sent = primary.inner.requests[-1]["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["text"]
    assert session.history[1] is foreign  # the history keeps it as it was said
    plan = session.warm_plan(gaps=[600.0] * 5)
    assert plan is not None
    assert plan.sends
    agent.clock.advance(plan.at - agent.clock.now())  # type: ignore[attr-defined]
    assert await session.warm(gaps=[600.0] * 5) is not None
    ping = primary.inner.requests[-1]
    assert ping["max_tokens"] == 2049  # the keep-warm request
    assert [b["type"] for b in ping["messages"][1]["content"]] == ["text"]


def test_what_counts_as_unavailable_and_how_it_is_said() -> None:
    assert transient(ProviderError("x", status=529, attempts=4))
    assert transient(ProviderError("x", status=None))
    assert transient(ProviderTimeout("x", phase="first_byte"))
    assert not transient(InvalidRequest("x"))
    assert not transient(AuthenticationError("x", status=401))
    assert not transient(ProviderError("x", status=404))
    assert (
        why("m", ProviderError("x", status=429, attempts=5)) == "fallback: m rate-limited (429 x5)"
    )
    assert why("m", ProviderError("x")) == "fallback: m unreachable"


def test_sendable_leaves_out_only_foreign_thinking() -> None:
    own = AssistantMessage(
        content=(ThinkingBlock(thinking="a", signature="s"), TextBlock(text="x"))
    )
    other = AssistantMessage(
        content=(ThinkingBlock(thinking="b", signature="t"), TextBlock(text="y")), origin="openai"
    )
    history = (UserMessage(content=(TextBlock(text="q"),)), own, other)
    home, cut = sendable(history, to="anthropic", home="anthropic")
    assert cut == 1
    assert home[1] is own
    assert home[2].content == (TextBlock(text="y"),)
    away, cut = sendable(history, to="openai", home="anthropic")
    assert cut == 1
    assert away[2] is other
