"""The provider strings of Bedrock, OpenRouter, DeepSeek and the local servers: keys and
base URLs from the settings, clear refusals, and the model facts each provider gives."""

from __future__ import annotations

import pytest

from stoker.config import Config
from stoker.errors import ConfigError
from stoker.providers.bedrock import BedrockProvider
from stoker.providers.compat import DeepSeekProvider, LocalProvider, OpenRouterProvider
from stoker.providers.select import select_provider

ENV = {
    "AWS_ACCESS_KEY_ID": "AKIASPEC000000000001",
    "AWS_SECRET_ACCESS_KEY": "spec-secret",
    "AWS_DEFAULT_REGION": "eu-central-1",
    "OPENROUTER_API_KEY": "sk-or-spec",
    "DEEPSEEK_API_KEY": "sk-ds-spec",
}


@pytest.mark.parametrize(
    ("spec", "kind", "family"),
    [
        ("bedrock:eu.anthropic.claude-sonnet-4-5-20250929-v1:0", BedrockProvider, "bedrock"),
        ("openrouter:anthropic/claude-sonnet-4.6", OpenRouterProvider, "openrouter"),
        ("openrouter:openai/gpt-5.6", OpenRouterProvider, "openai"),
        ("openrouter:google/gemini-2.5-pro", OpenRouterProvider, "openrouter"),
        ("deepseek:deepseek-reasoner", DeepSeekProvider, "deepseek"),
        ("openai-compatible+vllm:http://127.0.0.1:8000/v1#qwen3-8b", LocalProvider, "local"),
        ("openai-compatible+llamacpp:http://127.0.0.1:8080/v1#gemma", LocalProvider, "local"),
    ],
)
def test_each_spec_names_its_provider_and_the_model_family_whose_rules_apply(
    spec: str, kind: type, family: str
) -> None:
    choice = select_provider(spec, config=Config.from_env(ENV))
    assert isinstance(choice.provider, kind)
    assert choice.model is not None
    assert choice.provider.model_info(choice.model).provider == family
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
    ):
        assert ENV[name] not in repr(choice.provider)


def test_bedrock_takes_region_and_endpoint_from_the_settings() -> None:
    env = {**ENV, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": "http://127.0.0.1:9"}
    provider = select_provider("bedrock:x", config=Config.from_env(env)).provider
    assert isinstance(provider, BedrockProvider)
    assert (provider.region, provider.base_url) == ("eu-central-1", "http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openrouter:anthropic/claude-sonnet-4.6", "set OPENROUTER_API_KEY"),
        ("deepseek:deepseek-chat", "set DEEPSEEK_API_KEY"),
        ("openai-compatible+sglang:http://127.0.0.1:1/v1#m", "unknown server 'sglang'"),
        ("openai-compatible+vllm:http://127.0.0.1:1/v1", "openai-compatible\\+vllm:URL#MODEL"),
    ],
)
def test_refusals_say_what_to_do(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        select_provider(spec, config=Config.from_env({}))


def test_a_local_model_is_free_and_its_provider_names_its_server() -> None:
    provider = select_provider(
        "openai-compatible+llamacpp:http://127.0.0.1:8080/v1#gemma", config=Config.from_env({})
    ).provider
    info = provider.model_info("gemma")
    assert (provider.name, info.input, info.output) == ("openai-compatible+llamacpp", 0.0, 0.0)
    assert info.lookback == 0
    assert info.ttls == ()
