"""The simulator over HTTP, driven by the official SDKs and plain HTTP, no Stoker client code.

One server runs for the module on a free loopback port; each test uses its own API key,
which is its own workspace, so caches never leak between tests.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from click.testing import CliRunner

from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import ScriptedModel
from stoker.providers.sim.server import ServedSim, create_app, serve_in_background

# Long enough for every model's minimum (1,024 tokens; 2,048-token steps on gpt-5.5).
SYSTEM = "You review pull requests for a Python team. " + "Keep every answer short. " * 600


@pytest.fixture(scope="module")
def served() -> Iterator[ServedSim]:
    with serve_in_background(create_app(clock=FrozenClock())) as served:
        yield served


@pytest.fixture
def key() -> str:
    return f"sk-sim-{uuid.uuid4().hex}"


@pytest.fixture
def claude(served: ServedSim, key: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key=key, base_url=served.url, max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(served: ServedSim, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key=key, base_url=served.openai_url, max_retries=0) as client:
        yield client


def _messages_args(text: str = "Is this diff safe?") -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": text}],
    }


def test_anthropic_sdk_second_identical_prefix_request_reads_the_cache(
    claude: anthropic.Anthropic,
) -> None:
    first = claude.messages.create(**_messages_args())
    second = claude.messages.create(**_messages_args("And this one?"))
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens > 1024
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation.ephemeral_5m_input_tokens == 0


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5.5"])
def test_openai_sdk_chat_second_identical_prefix_request_reports_cached_tokens(
    gpt: openai.OpenAI, model: str
) -> None:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    first = gpt.chat.completions.create(model=model, messages=messages)
    second = gpt.chat.completions.create(model=model, messages=messages)
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached > 0
    assert cached % 128 == 0


def test_openai_sdk_responses_second_request_reports_cached_tokens(gpt: openai.OpenAI) -> None:
    items = [{"role": "developer", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    gpt.responses.create(model="gpt-4.1", input=items)
    second = gpt.responses.create(model="gpt-4.1", input=items)
    assert second.usage is not None
    assert second.usage.input_tokens_details.cached_tokens > 1024
    assert second.output_text.startswith("Understood")


def test_anthropic_sdk_stream_matches_the_non_streamed_answer(claude: anthropic.Anthropic) -> None:
    plain = claude.messages.create(**_messages_args())
    kinds = []
    with claude.messages.stream(**_messages_args()) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert {"content_block_start", "content_block_stop", "message_delta"} <= set(kinds)
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in plain.content]
    assert final.usage.cache_read_input_tokens == plain.usage.cache_creation_input_tokens
    assert final.usage.output_tokens == plain.usage.output_tokens


def test_openai_sdk_chat_stream_ends_with_usage_when_asked(gpt: openai.OpenAI) -> None:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    chunks = list(
        gpt.chat.completions.create(
            model="gpt-4.1",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Understood: hi"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens > 1024
    quiet = list(gpt.chat.completions.create(model="gpt-4.1", messages=messages, stream=True))
    assert all(c.usage is None for c in quiet)


def test_openai_sdk_responses_stream_completes_with_usage(gpt: openai.OpenAI) -> None:
    items = [{"role": "developer", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    with gpt.responses.stream(model="gpt-5.6", input=items) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert final.output_text == "Understood: hi"
    assert final.usage is not None
    assert final.usage.input_tokens_details.cache_write_tokens > 1024


def test_count_tokens_is_the_total_a_call_bills(claude: anthropic.Anthropic) -> None:
    args = _messages_args()
    counted = claude.messages.count_tokens(
        model=args["model"], system=args["system"], messages=args["messages"]
    )
    usage = claude.messages.create(**args).usage
    total = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    assert counted.input_tokens == total


def test_caches_are_per_key(served: ServedSim) -> None:
    reads = []
    for name in ("alice", "bob"):
        key = f"sk-{name}-{uuid.uuid4().hex}"
        with anthropic.Anthropic(api_key=key, base_url=served.url, max_retries=0) as client:
            reads.append(client.messages.create(**_messages_args()).usage.cache_read_input_tokens)
    assert reads == [0, 0]


def test_stats_totals_per_key_and_model_never_show_the_key(
    served: ServedSim, claude: anthropic.Anthropic, key: str
) -> None:
    claude.messages.create(**_messages_args())
    claude.messages.create(**_messages_args())
    stats = httpx.get(served.url + "/stats", headers={"x-api-key": key}).json()
    assert key not in json.dumps(stats)
    mine = stats["keys"][stats["you"]]
    assert list(mine["models"]) == ["claude-sonnet-4-6"]
    assert mine["models"]["claude-sonnet-4-6"]["requests"] == mine["requests"] == 2
    assert mine["read"] == mine["written_5m"] > 1024


def test_no_key_is_401_in_each_providers_shape(served: ServedSim) -> None:
    body = _messages_args()
    bare = httpx.post(served.url + "/v1/messages", json=body)
    assert bare.status_code == 401
    assert bare.json()["type"] == "error"
    assert bare.json()["error"]["type"] == "authentication_error"
    chat = httpx.post(served.openai_url + "/chat/completions", json={"model": "gpt-4.1"})
    assert chat.status_code == 401
    assert chat.json()["error"]["code"] == "invalid_api_key"


def test_a_key_the_server_does_not_accept_is_401() -> None:
    with (
        serve_in_background(create_app(api_keys=["sk-good"])) as served,
        anthropic.Anthropic(api_key="sk-bad", base_url=served.url, max_retries=0) as client,
        pytest.raises(anthropic.AuthenticationError),
    ):
        client.messages.create(**_messages_args())


def test_bad_json_is_400_in_each_providers_shape(served: ServedSim, key: str) -> None:
    headers = {"x-api-key": key, "content-type": "application/json"}
    broken = httpx.post(served.url + "/v1/messages", content=b"{nope", headers=headers)
    assert broken.status_code == 400
    assert broken.json()["error"]["type"] == "invalid_request_error"
    auth = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    for path in ("/chat/completions", "/responses"):
        response = httpx.post(served.openai_url + path, content=b"[1, 2", headers=auth)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_more_than_four_breakpoints_is_400(claude: anthropic.Anthropic) -> None:
    marked = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": marked} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": blocks}]
        )
    assert caught.value.type == "invalid_request_error"


def test_tool_use_without_tool_result_is_400(claude: anthropic.Anthropic) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    with pytest.raises(anthropic.BadRequestError, match="toolu_1"):
        claude.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=10,
            messages=[
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": "well?"},
            ],
        )


def test_unknown_model_is_404(claude: anthropic.Anthropic, gpt: openai.OpenAI) -> None:
    with pytest.raises(anthropic.NotFoundError, match="claude-nope"):
        claude.messages.create(**{**_messages_args(), "model": "claude-nope"})
    with pytest.raises(openai.NotFoundError) as caught:
        gpt.chat.completions.create(model="gpt-nope", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_found"


def test_injected_failures_come_first_with_retry_after(
    served: ServedSim, claude: anthropic.Anthropic
) -> None:
    queued = httpx.post(
        served.url + "/sim/fail", json={"status": 529, "count": 2, "retry_after": 0}
    )
    assert queued.json() == {"queued": 2, "status": 529}
    for _ in range(2):
        with pytest.raises(anthropic.OverloadedError) as caught:
            claude.messages.create(**_messages_args())
        assert caught.value.response.headers["retry-after"] == "0"
    assert claude.messages.create(**_messages_args()).usage.cache_creation_input_tokens > 0


def test_model_script_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps([{"text": "scripted hello"}]))
    started: list[SimEngine] = []
    monkeypatch.setattr(
        "stoker.providers.sim.server.serve", lambda engine, **kw: started.append(engine)
    )
    result = CliRunner().invoke(app, ["sim", "serve", "--port", "0", "--model-script", str(script)])
    assert result.exit_code == 0, result.output
    assert isinstance(started[0].model, ScriptedModel)
    with (
        serve_in_background(create_app(started[0])) as served,
        anthropic.Anthropic(api_key="k", base_url=served.url, max_retries=0) as client,
    ):
        reply = client.messages.create(**_messages_args())
    assert reply.content[0].text == "scripted hello"


def test_a_bad_model_script_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text("{not a list")
    result = CliRunner().invoke(app, ["sim", "serve", "--model-script", str(script)])
    assert result.exit_code == 1
    assert "model script" in result.output


def test_reset_forgets_entries_totals_and_pending_failures(
    served: ServedSim, claude: anthropic.Anthropic, key: str
) -> None:
    claude.messages.create(**_messages_args())
    httpx.post(served.url + "/sim/fail", json={"status": 500, "count": 5})
    httpx.post(served.url + "/sim/reset").raise_for_status()
    again = claude.messages.create(**_messages_args())
    assert again.usage.cache_read_input_tokens == 0
    stats = httpx.get(served.url + "/stats", headers={"x-api-key": key}).json()
    assert stats["keys"][stats["you"]]["requests"] == 1


def test_sim_serve_has_help() -> None:
    result = CliRunner().invoke(app, ["sim", "serve", "--help"])
    assert result.exit_code == 0
    assert "--model-script" in result.output
