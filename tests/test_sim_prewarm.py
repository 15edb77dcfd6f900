"""Pre-warm requests are priced exactly: Anthropic `max_tokens: 0` and OpenAI Responses
`prompt_cache_options.prewarm` (docs/provider-caching.md, "Anthropic pre-warm" and
"OpenAI prewarm").

Same token arithmetic as the worked examples there: tools 2,000 and system 1,000
tokens (Anthropic, claude-sonnet-4-6), developer 1,500 tokens (OpenAI, gpt-5.6).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stoker.clock import FrozenClock
from stoker.errors import InvalidRequest
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import ScriptedModel
from stoker.providers.sim.server import ServedSim, create_app, serve_in_background
from stoker.wire.dialects import anthropic, openai_responses
from stoker.wire.messages import user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from stoker.wire.usage import Usage
from tests.accounting_helpers import assistant, body, frame, openai_message, part, text, user


def t2_messages(*, ttl: str | None = None) -> list[dict[str, Any]]:
    return [user(text(50)), assistant(text(200)), user(text(60, ttl=ttl))]


def test_max_tokens_0_writes_at_its_markers_and_generates_nothing() -> None:
    engine = SimEngine(model=ScriptedModel([]))  # a model call would fail: no steps
    result = engine.handle("anthropic", body(user(text(50)), max_tokens=0), at=0.0)
    assert result.usage == Usage(written_5m=3050, output=0)
    assert (result.body["content"], result.body["stop_reason"]) == ([], "max_tokens")
    assert result.body["usage"]["output_tokens"] == 0


def test_seal_reads_the_prefix_and_writes_the_tail_under_one_1h_breakpoint() -> None:
    engine = SimEngine(model=ScriptedModel(["ok"]))
    engine.handle("anthropic", body(user(text(50)), max_tokens=0), at=0.0)  # T1, pre-warmed
    seal = body(*t2_messages(ttl="1h"), auto=False, max_tokens=0)
    assert engine.handle("anthropic", seal, at=10.0).usage == Usage(read=3050, written_1h=260)
    # 30 minutes on, the 5m entry is gone and the sealed 1h one still answers.
    later = body(*t2_messages(), assistant(text(40)), user(text(30)))
    assert engine.handle("anthropic", later, at=1810.0).usage == Usage(
        read=3310, written_5m=70, output=1
    )


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"stream": True}, "`stream: true`"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "extended thinking"),
        ({"tool_choice": {"type": "any"}}, "a forced `tool_choice`"),
        ({"tool_choice": {"type": "tool", "name": "read_file"}}, "a forced `tool_choice`"),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
            "`output_config.format`",
        ),
    ],
)
def test_max_tokens_0_is_refused_with_what_the_api_refuses(
    extra: dict[str, Any], named: str
) -> None:
    engine = SimEngine()
    with pytest.raises(InvalidRequest, match="max_tokens: 0") as caught:
        engine.handle("anthropic", body(user(text(50)), max_tokens=0, **extra), at=0.0)
    assert named in str(caught.value)
    assert engine.anthropic.entries() == {}  # refused before any accounting


def prewarm_request(model: str) -> Request:
    return Request(
        prefix=Prefix(params=CacheParams(model=model)), messages=(user_text("hi"),), max_tokens=0
    )


def test_max_tokens_0_renders_and_parses_as_0() -> None:
    payload = anthropic.render_request(prewarm_request("claude-sonnet-4-6"))
    assert payload["max_tokens"] == 0
    assert anthropic.parse_request(payload).max_tokens == 0


def developer(n: int = 1500) -> dict[str, Any]:
    """A developer message of `n` tokens (frame included) ending with a breakpoint."""
    return {"role": "developer", "content": [part(n - frame("developer"), ttl="30m")]}


def asks(question: str, n: int = 100) -> dict[str, Any]:
    return openai_message("user", n, question)


PRIMING = 3  # the tokens priming OpenAI's reply, after the last message: never cached


def test_responses_prewarm_writes_like_a_real_request_and_generates_nothing() -> None:
    engine = SimEngine(model=ScriptedModel(["ok"]))
    explicit = {"mode": "explicit"}
    warm = {
        "model": "gpt-5.6",
        "input": [developer(), asks("placeholder")],
        "prompt_cache_options": {**explicit, "prewarm": True},
    }
    result = engine.handle("openai_responses", warm, at=0.0)
    assert result.usage == Usage(written_5m=1500, uncached=100 + PRIMING, output=0)
    assert (result.body["output"], result.body["status"]) == ([], "completed")
    assert result.body["usage"]["output_tokens"] == 0
    real = {**warm, "input": [developer(), asks("the question")], "prompt_cache_options": explicit}
    answered = engine.handle("openai_responses", real, at=10.0)
    # gpt-5.6 reasons before it answers: its reasoning tokens are output too
    reasoning = answered.body["usage"]["output_tokens_details"]["reasoning_tokens"]
    assert reasoning > 0
    assert answered.usage == Usage(read=1500, uncached=100 + PRIMING, output=1 + reasoning)


def test_responses_prewarm_honours_the_12h_ttl_option() -> None:
    engine = SimEngine()
    warm = {
        "model": "gpt-5.6",
        "input": [openai_message("developer", 1500), asks("placeholder")],
        "prompt_cache_options": {"ttl": "12h", "prewarm": True},
    }
    usage = engine.handle("openai_responses", warm, at=0.0).usage
    assert usage == Usage(written_1h=1600, uncached=PRIMING)
    (entry,) = engine.openai.entries().values()
    assert (entry.ttl, entry.expires_at) == ("12h", 43200.0)


@pytest.mark.parametrize(
    ("dialect", "payload"),
    [
        ("openai_responses", {"model": "gpt-4.1", "input": "hi"}),
        ("openai_chat", {"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}]}),
    ],
)
def test_prewarm_is_refused_where_openai_has_no_such_option(
    dialect: str, payload: dict[str, Any]
) -> None:
    with pytest.raises(InvalidRequest, match=r"prompt_cache_options\.prewarm"):
        SimEngine().handle(dialect, {**payload, "prompt_cache_options": {"prewarm": True}}, at=0.0)


def test_max_tokens_0_renders_as_a_responses_prewarm() -> None:
    payload = openai_responses.render_request(prewarm_request("gpt-5.6"))
    assert payload["prompt_cache_options"] == {"prewarm": True}
    assert "max_output_tokens" not in payload
    assert openai_responses.parse_request(payload).max_tokens == 0


@pytest.fixture(scope="module")
def served() -> Iterator[ServedSim]:
    with serve_in_background(create_app(clock=FrozenClock())) as served:
        yield served


def test_http_prewarm_answers_empty_and_bills_no_output(served: ServedSim) -> None:
    headers = {"x-api-key": "sk-prewarm"}
    payload = body(user(text(50)), max_tokens=0)
    response = httpx.post(f"{served.url}/v1/messages", json=payload, headers=headers)
    assert response.status_code == 200
    answer = response.json()
    assert (answer["content"], answer["stop_reason"]) == ([], "max_tokens")
    assert answer["usage"]["cache_creation_input_tokens"] == 3050
    assert answer["usage"]["output_tokens"] == 0
    stats = httpx.get(f"{served.url}/stats", headers=headers).json()
    assert stats["keys"][stats["you"]]["output"] == 0


def test_http_streamed_prewarm_is_400(served: ServedSim) -> None:
    payload = body(user(text(50)), max_tokens=0, stream=True)
    response = httpx.post(
        f"{served.url}/v1/messages", json=payload, headers={"x-api-key": "sk-prewarm-stream"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "cannot be combined with `stream: true`" in error["message"]
