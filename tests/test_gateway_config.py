"""`stoker serve` configuration: TOML + environment; tokens are only ever held hashed."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from stoker.agent.keepwarm import SpendLimits
from stoker.config import DEFAULT_LIMITS, GatewayLimits
from stoker.errors import ConfigError
from stoker.gateway.auth import TokenTable
from stoker.gateway.config import GatewayConfig, load_config
from stoker.gateway.errors import Unauthorized
from stoker.gateway.providers import ProviderRoute, default_provider_factory
from stoker.gateway.server import build_gateway
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.anthropic import AnthropicProvider
from stoker.providers.retry import Timeouts
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore

CONFIG = """
port = 9000
database = "gateway.db"

[agent]
model = "claude-opus-4-6"
api_key_env = "MY_KEY"
system_file = "prompt.md"
reasoning = "high"
toolsets = ["files"]

[limits]
max_body_bytes = 4096

[cache]
size = 16
idle_ttl_seconds = 60

[[users]]
id = "alice"
token = "plain-token-for-alice"

[[users]]
id = "bob"
token_sha256 = "%s"
"""


def _write(tmp_path: Path) -> Path:
    (tmp_path / "prompt.md").write_text("Be brief.")
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG % hashlib.sha256(b"bob-token").hexdigest())
    return path


def _assert_refused(path: Path, text: str, match: str) -> None:
    """A config file holding `text` is refused, with an error matching `match` (what
    to fix, and where)."""
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(path, env={})


def test_a_config_file_with_the_environment_on_top(tmp_path: Path) -> None:
    env = {"MY_KEY": "sk-secret-key-value", "STOKER_GATEWAY_PORT": "9100"}
    config = load_config(_write(tmp_path), env=env)
    assert config.port == 9100
    assert config.database == str(tmp_path / "gateway.db")
    d = config.defaults
    assert (d.model, d.system, d.effort, d.toolsets) == (
        "claude-opus-4-6",
        "Be brief.",
        "high",
        ("files",),
    )
    assert config.limits == GatewayLimits(
        max_body_bytes=4096,
        max_message_chars=DEFAULT_LIMITS.max_message_chars,
        cache_size=16,
        idle_ttl=60.0,
    )
    assert config.api_key == "sk-secret-key-value"
    assert config.tokens.user_for("Bearer plain-token-for-alice") == "alice"
    assert config.tokens.user_for("Bearer bob-token") == "bob"
    shown = repr(config)
    assert "sk-secret" not in shown
    assert "plain-token" not in shown


def test_without_a_file_the_database_and_key_come_from_the_given_environment(
    tmp_path: Path,
) -> None:
    env = {"STOKER_HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-from-env"}
    config = load_config(None, env={**env, "STOKER_GATEWAY_PROVIDER": "anthropic"})
    assert config.database == str(tmp_path / "stoker.db")
    assert config.api_key == "sk-ant-from-env"
    assert config.limits == DEFAULT_LIMITS
    dsn = "postgresql://stoker:hunter2-password@db/stoker"
    config = load_config(None, env={"STOKER_DATABASE_URL": dsn})
    assert config.database == dsn
    assert config.api_key is None  # the simulator needs none
    assert "hunter2" not in repr(config)
    with pytest.raises(ConfigError, match="needs a database"):
        build_gateway(GatewayConfig())  # built by hand: nothing picks a database behind it


def test_tokens_are_hashed_when_loaded_and_never_kept(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path), env={"STOKER_GATEWAY_TOKENS": "carol=carol-token"})
    held = repr(config.tokens._users)  # noqa: SLF001 - everything the table keeps
    assert "plain-token-for-alice" not in held
    assert "carol-token" not in held
    assert hashlib.sha256(b"plain-token-for-alice").hexdigest() in held
    assert config.tokens.user_for("Bearer carol-token") == "carol"


@pytest.mark.parametrize("header", [None, "", "Bearer", "Basic abc", "Bearer wrong-token"])
def test_a_missing_or_unknown_token_is_unauthorized(header: str | None) -> None:
    table = TokenTable({hashlib.sha256(b"right").hexdigest(): "alice"})
    with pytest.raises(Unauthorized) as caught:
        table.user_for(header)
    assert "wrong-token" not in str(caught.value)


def test_bad_config_says_what_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    _assert_refused(path, '[agent]\nmodle = "x"\n[[users]]\nid = "a"\n', r"agent\.modle")
    _assert_refused(path, '[[users]]\nid = "a"\n', "exactly one of token or token_sha256")


def test_the_default_factory_routes_key_and_base_url_to_the_real_providers() -> None:
    sim = default_provider_factory(ProviderRoute(provider="sim", model="claude-sonnet-4-6"))
    assert isinstance(sim, SimProvider)
    assert sim.keep_requests is False  # a server runs for days
    route = ProviderRoute(
        provider="anthropic",
        model="claude-sonnet-4-6",
        base_url="http://127.0.0.1:9",
        api_key="sk-ant-test-key",
    )
    provider = default_provider_factory(route)
    assert (provider.name, getattr(provider, "base_url", None)) == ("anthropic", route.base_url)
    assert "sk-ant-test-key" not in repr(provider) + repr(route)
    chat = default_provider_factory(
        ProviderRoute(provider="openai", model="gpt-5.5", api_mode="chat", api_key="sk-test")
    )
    assert getattr(chat, "api", None) == "chat"
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        default_provider_factory(ProviderRoute(provider="anthropic", model="claude-sonnet-4-6"))


def test_the_agent_model_may_name_its_provider_as_the_command_line_does(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"

    def route(agent: str, env: dict[str, str] | None = None) -> tuple[str, str]:
        path.write_text(f"[agent]\n{agent}\n")
        defaults = load_config(path, env=env or {}).defaults
        return defaults.provider, defaults.model

    named = 'model = "anthropic:claude-sonnet-4-6"'
    assert route(named) == ("anthropic", "claude-sonnet-4-6")
    assert route('provider = "anthropic"\n' + named) == ("anthropic", "claude-sonnet-4-6")
    assert route('model = "x"', {"STOKER_GATEWAY_MODEL": "openai:gpt-5.5"}) == (
        "openai",
        "gpt-5.5",
    )
    bedrock = 'provider = "bedrock"\nmodel = "anthropic.claude-sonnet-4-6-v1:0"'
    assert route(bedrock) == ("bedrock", "anthropic.claude-sonnet-4-6-v1:0")  # no provider
    with pytest.raises(ConfigError, match="names the anthropic provider, but provider is 'openai'"):
        route('provider = "openai"\n' + named)


def test_the_default_agent_is_checked_before_anything_is_served(tmp_path: Path) -> None:
    """`stoker serve` calls `check` before it takes its port: no network, no store."""
    store = SQLiteStore(tmp_path / "s.db")
    gateway = Gateway(store=store, defaults=SessionSettings(model="no-such-model"))
    with pytest.raises(ConfigError, match="unknown model 'no-such-model'"):
        gateway.check()
    assert not (tmp_path / "s.db").exists()


async def test_a_gateway_with_unusable_defaults_fails_at_start(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        gateway = Gateway(store=store, defaults=SessionSettings(model="no-such-model"))
        with pytest.raises(ConfigError, match="unknown model 'no-such-model'"):
            await gateway.start()
    finally:
        await store.close()


@asynccontextmanager
async def _built(config: GatewayConfig, tmp_path: Path) -> AsyncIterator[Gateway]:
    """The gateway `stoker serve` builds from `config`, on a database in `tmp_path`;
    closed, and its store, after."""
    gateway = build_gateway(config, store=SQLiteStore(tmp_path / "s.db"))
    try:
        yield gateway
    finally:
        await gateway.close()
        await gateway.store.close()


async def test_keep_warm_caps_come_from_the_file_and_reach_the_gateway(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text("[keep_warm]\nenabled = false\nhourly_usd = 2.5\ntotal_usd = 40\n")
    config = load_config(path, env={})
    assert (config.keep_warm, config.keep_warm_limits) == (
        False,
        SpendLimits(hourly_usd=2.5, total_usd=40.0),
    )
    async with _built(config, tmp_path) as gateway:
        assert gateway.keep_warm.scheduler.limits == SpendLimits(hourly_usd=2.5, total_usd=40.0)
        sid = await gateway.create_session("alice")
        await gateway.send("alice", sid, "hello")
        assert sid not in gateway.keep_warm.scheduler  # switched off: no timer
    _assert_refused(path, "[keep_warm]\nhourly_usd = -1\n", r"keep_warm\.hourly_usd")


async def test_provider_timeouts_come_from_the_file_and_reach_the_provider(
    tmp_path: Path,
) -> None:
    assert load_config(None, env={}).timeouts == Timeouts()  # the defaults, without a file
    path = tmp_path / "gateway.toml"
    path.write_text(
        '[agent]\nprovider = "anthropic"\nbase_url = "http://127.0.0.1:9"\n'
        "[timeouts]\nconnect_seconds = 3\nfirst_byte_seconds = 45\ntotal_seconds = 900\n"
    )
    config = load_config(path, env={"ANTHROPIC_API_KEY": "sk-ant-test-key"})
    assert config.timeouts == Timeouts(connect=3.0, first_byte=45.0, total=900.0)
    async with _built(config, tmp_path) as gateway:
        provider = gateway.pool.provider_for(config.defaults)
        inner = getattr(provider, "inner", None)
        assert isinstance(inner, AnthropicProvider)
        assert inner.retry.timeouts == config.timeouts  # the SDK client is made from these
    _assert_refused(path, "[timeouts]\ntotal_seconds = 0\n", r"timeouts\.total_seconds")


async def test_the_approval_timeout_comes_from_the_file_and_reaches_the_gateway(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gateway.toml"
    assert load_config(None, env={}).approval_timeout == 240.0  # under the 5-minute TTL
    path.write_text("[approvals]\ntimeout_seconds = 90\n")
    config = load_config(path, env={})
    assert config.approval_timeout == 90.0
    async with _built(config, tmp_path) as gateway:
        assert gateway.approvals.timeout == 90.0
    _assert_refused(path, "[approvals]\ntimeout_seconds = 0\n", r"approvals\.timeout_seconds")
