"""Provider strings: every documented form, keys from the settings, clear refusals."""

from __future__ import annotations

import pytest

from stoker.config import Config
from stoker.errors import ConfigError
from stoker.providers.anthropic import AnthropicProvider
from stoker.providers.openai import QUIRKS, OpenAIProvider
from stoker.providers.select import select_provider
from stoker.providers.sim.provider import SimProvider

KEY = "sk-select-test-8c1e0b7a"
ENV = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY}
NONE = Config.from_env({})


@pytest.mark.parametrize(
    ("spec", "model"), [("sim:", None), ("", None), ("sim:gpt-5.6", "gpt-5.6")]
)
def test_sim_is_the_default_and_needs_no_key(spec: str, model: str | None) -> None:
    choice = select_provider(spec)
    assert isinstance(choice.provider, SimProvider)
    assert choice.model == model


def test_anthropic_takes_its_key_and_base_url_from_the_settings() -> None:
    config = Config.from_env({**ENV, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"})
    choice = select_provider("anthropic:claude-sonnet-4-6", config=config)
    assert isinstance(choice.provider, AnthropicProvider)
    assert (choice.provider.name, choice.model) == ("anthropic", "claude-sonnet-4-6")
    assert choice.provider.base_url == "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    ("spec", "api"), [("openai:gpt-5.5", "responses"), ("openai-chat:gpt-5.5", "chat")]
)
def test_openai_picks_the_api(spec: str, api: str) -> None:
    config = Config.from_env({**ENV, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    choice = select_provider(spec, config=config)
    assert isinstance(choice.provider, OpenAIProvider)
    assert (choice.provider.name, choice.provider.api, choice.model) == ("openai", api, "gpt-5.5")
    assert choice.provider.base_url == "http://127.0.0.1:9/v1"


def test_openai_compatible_takes_url_and_model_and_works_without_a_key() -> None:
    choice = select_provider("openai-compatible:http://127.0.0.1:8000/v1#qwen3-8b", config=NONE)
    provider = choice.provider
    assert isinstance(provider, OpenAIProvider)
    assert (provider.name, provider.api, provider.base_url) == (
        "openai-compatible",
        "chat",
        "http://127.0.0.1:8000/v1",
    )
    assert choice.model == "qwen3-8b"
    assert provider.quirks == QUIRKS["generic"]
    # An unknown self-hosted model gets OpenAI's usual facts, not an error.
    assert provider.model_info("qwen3-8b").provider == "openai"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("anthropic:claude-sonnet-4-6", "set ANTHROPIC_API_KEY"),
        ("openai:gpt-5.5", "set OPENAI_API_KEY"),
        ("openai-compatible:http://127.0.0.1:8000/v1", "openai-compatible:URL#MODEL"),
        ("gemini:pro", "unknown provider 'gemini'"),
    ],
)
@pytest.mark.parametrize("config", [None, NONE])
def test_refusals_say_what_to_do(spec: str, message: str, config: Config | None) -> None:
    with pytest.raises(ConfigError, match=message):
        select_provider(spec, config=config)


def test_the_key_never_shows_in_a_provider_repr() -> None:
    for spec in ("anthropic:claude-sonnet-4-6", "openai:gpt-5.5"):
        provider = select_provider(spec, config=Config.from_env(ENV)).provider
        assert KEY not in repr(provider)
