"""Keys as the official SDKs find them: `Agent("anthropic:...")` with no config works
wherever `anthropic.AsyncAnthropic()` alone would, because Stoker leaves the SDK to read
its own variables (Stoker's library code reads none). A missing key is a clear error that
names the variable the SDK reads (no CLI flag), and a key shows in no log, error or repr.

The SDKs read the process environment, so these tests set it (monkeypatch); the provider
on the other end is `stoker sim serve` on a loopback port, which files each request under
the key its x-api-key / Authorization header carried."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stoker import Agent
from stoker.config import Config
from stoker.errors import ConfigError
from stoker.providers.select import select_provider
from stoker.store.sqlite import SQLiteStore
from tests.provider_rigs import SYSTEM, assert_secret_nowhere, chained, served_sim

KEY = "sk-newcomer-5d2b7e19c0a4"
SDK_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
)


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A process environment holding none of the SDKs' variables."""
    for name in SDK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("spec", "key_var", "url_var", "path"),
    [
        ("anthropic:claude-sonnet-4-6", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", ""),
        ("openai:gpt-5.5", "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1"),
        ("openai-chat:gpt-5.5", "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1"),
    ],
)
async def test_without_a_config_the_sdk_finds_its_key_and_base_url(
    spec: str,
    key_var: str,
    url_var: str,
    path: str,
    bare_env: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with served_sim() as served, caplog.at_level(logging.DEBUG):
        bare_env.setenv(key_var, KEY)
        bare_env.setenv(url_var, served.url + path)
        agent = Agent(spec, system=SYSTEM)  # no config: nothing from Stoker's side
        db = tmp_path / "s.db"
        async with SQLiteStore(db) as store:
            session = await agent.open(store, "keys")
            first = await session.send("hello")
            second = await session.send("and again")
        await agent.aclose()
        sent = served.app.state.sim.sent_by(KEY)  # filed under the header's key
    assert len(sent) == 2
    assert first.text
    assert second.text
    assert second.records[0].usage.read > 1000  # a real provider session, cache and all
    assert KEY not in repr(agent) + repr(agent.provider)
    assert_secret_nowhere(KEY, caplog, db=db)


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("anthropic:claude-sonnet-4-6", "ANTHROPIC_API_KEY"),
        ("openai:gpt-5.5", "OPENAI_API_KEY"),
        ("openai-chat:gpt-5.5", "OPENAI_API_KEY"),
    ],
)
def test_with_no_key_anywhere_the_error_names_the_sdks_variable(
    spec: str, variable: str, bare_env: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError) as error:
        Agent(spec)
    message = str(error.value)
    assert f"set {variable}" in message
    assert "--provider" not in message  # a library error, not the CLI's
    assert "api_key=" in message  # and the other way: pass one


async def test_a_key_given_in_the_settings_wins_over_the_sdks_variable(
    bare_env: pytest.MonkeyPatch,
) -> None:
    theirs = "sk-the-environments-key-0000"
    with served_sim() as served:
        bare_env.setenv("ANTHROPIC_API_KEY", theirs)
        config = Config.from_env({}, anthropic_api_key=KEY, anthropic_base_url=served.url)
        agent = Agent("anthropic:claude-sonnet-4-6", system=SYSTEM, config=config)
        await agent.session().send("hello")
        await agent.aclose()
        sim = served.app.state.sim
        assert len(sim.sent_by(KEY)) == 1
        assert sim.sent_by(theirs) == []


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openrouter:anthropic/claude-sonnet-4.6", "OPENROUTER_API_KEY"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"),
    ],
)
def test_openais_key_is_never_sent_to_openrouter_or_deepseek(
    spec: str, variable: str, bare_env: pytest.MonkeyPatch
) -> None:
    # They speak through the openai SDK, which would read OPENAI_API_KEY: not theirs.
    bare_env.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(ConfigError) as error:
        select_provider(spec)
    assert variable in str(error.value)
    assert "--provider" not in str(error.value)
    assert KEY not in chained(error.value)


SONNET_ON_BEDROCK = "anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture
def no_aws(tmp_path: Path, bare_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No AWS credentials anywhere the AWS SDK looks: not in the environment, not in its
    files, and no instance metadata service (a test never reaches the network)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        bare_env.delenv(name, raising=False)
    bare_env.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    bare_env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    bare_env.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bare_env.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # the AWS SDK's region variable
    return bare_env


async def test_bedrock_without_a_config_signs_with_the_aws_sdks_own_credentials(
    no_aws: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "bedrock-newcomer-secret-61c0"
    with served_sim() as served, caplog.at_level(logging.DEBUG):
        no_aws.setenv("AWS_ACCESS_KEY_ID", "AKIANEWCOMER00000001")
        no_aws.setenv("AWS_SECRET_ACCESS_KEY", secret)
        no_aws.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", served.url)
        agent = Agent(f"bedrock:{SONNET_ON_BEDROCK}", system=SYSTEM)
        answer = await agent.session().send("hello")
        await agent.aclose()
        assert served.app.state.sim.received  # signed by the SDK, accepted by the server
    assert answer.text
    assert_secret_nowhere(secret, caplog)


async def test_bedrock_with_no_credentials_anywhere_says_which_variables_to_set(
    no_aws: pytest.MonkeyPatch,
) -> None:
    agent = Agent(f"bedrock:{SONNET_ON_BEDROCK}", system=SYSTEM)  # the chain runs later
    with pytest.raises(ConfigError) as error:
        await agent.session().send("hello")
    await agent.aclose()
    assert "set AWS_ACCESS_KEY_ID" in str(error.value)
    assert "--provider" not in str(error.value)
