"""One model, one name: a router's vendor prefix or a dated alias names the same model for
prices, limits, the simulator's cache and the gateway's `/model` (issue 20, item 6)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stoker.cache.accounting import AnthropicAccountant, OpenAIAccountant
from stoker.cache.models import model_info, same_model
from stoker.errors import ConfigError
from stoker.store.base import SqlEventStore
from stoker.wire.usage import Usage
from tests.accounting_helpers import body, openai_message, text, user
from tests.test_gateway_support import answered, make_rig


@pytest.mark.parametrize(
    ("spelled", "bare"),
    [
        ("anthropic/claude-sonnet-4-6", "claude-sonnet-4-6"),
        ("openai/gpt-5.6", "gpt-5.6"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ],
)
def test_spellings_of_one_model_share_its_entry(spelled: str, bare: str) -> None:
    assert model_info(spelled) == model_info(bare)
    assert model_info(spelled).name == bare
    assert same_model(spelled, bare)
    assert same_model(bare, spelled)


def test_other_models_and_unknown_names_are_not_the_same() -> None:
    assert not same_model("anthropic/claude-sonnet-4-6", "claude-sonnet-4-5")
    assert not same_model("openai/claude-sonnet-4-6", "gpt-5.6")
    assert not same_model("no-such-model", "claude-sonnet-4-6")
    assert same_model("my-local-model", "my-local-model")  # unknown, but spelled alike
    with pytest.raises(ConfigError, match="unknown model"):
        model_info("anthropic/no-such-model")


def test_the_anthropic_simulator_reads_what_another_spelling_wrote() -> None:
    acc = AnthropicAccountant()
    first = acc.account(body(user(text(50)), model="anthropic/claude-sonnet-4-6"), at=0.0)
    assert first.usage == Usage(written_5m=3050)
    second = acc.account(body(user(text(50)), model="claude-sonnet-4-6"), at=10.0)
    assert second.usage == Usage(read=3050)


def test_the_openai_simulator_reads_what_another_spelling_wrote() -> None:
    acc = OpenAIAccountant()
    developer = openai_message("developer", 1500)

    def payload(model: str, question: str) -> dict[str, object]:
        asks = openai_message("user", 100, question)
        return {"model": model, "input": [developer, asks], "prompt_cache_key": "k"}

    acc.account(payload("openai/gpt-5.6", "one"), api="responses", at=0.0)
    acc.account(payload("openai/gpt-5.6", "one"), api="responses", at=5.0)
    second = acc.account(payload("gpt-5.6", "one"), api="responses", at=10.0)
    assert second.usage.read == 1600


async def test_model_command_with_another_spelling_is_not_a_switch(
    store: SqlEventStore,
) -> None:
    rig, sid, entry = await answered(store, model="claude-sonnet-4-6")
    gw = rig.gateway
    reply = await gw.send("alice", sid, "/model anthropic/claude-sonnet-4-6")
    assert reply.kind == "command"
    assert "already claude-sonnet-4-6" in reply.text
    assert gw.agents.peek(sid) is entry  # nothing evicted, nothing rebuilt
    answer = await gw.send("alice", sid, "still here")
    record = answer.requests[0]
    assert record["model"] == "claude-sonnet-4-6"
    assert record["explanation"]["verdict"] != "declared"
    assert record["usage"]["read"] > 0


async def test_a_resume_under_another_spelling_keeps_the_prefix(store: SqlEventStore) -> None:
    rig = make_rig(store)
    sid = await rig.gateway.create_session("alice", {})
    await rig.gateway.send("alice", sid, "hello")
    model = rig.gateway.defaults.model
    respelled = replace(rig.gateway.defaults, model=f"anthropic/{model}")
    other = rig.another_process(store, defaults=respelled)
    for message in ("after a restart", "and again"):
        answer = await other.send("alice", sid, message)
        record = answer.requests[0]
        assert record["model"] == model
        assert record["explanation"]["verdict"] != "declared"
        assert record["usage"]["read"] > 0
    assert other.pool.stats["rebuilt"] == 1  # only the first message, in a new process
