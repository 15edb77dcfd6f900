"""`google:` at the command line: `stoker run` and `stoker chat` against the served
simulator in Gemini's wire, keys from GEMINI_API_KEY / GOOGLE_API_KEY; `stoker serve`'s
provider factory; the provider spec and its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from stoker.cli import app
from stoker.config import Config
from stoker.errors import ConfigError
from stoker.gateway.providers import ProviderRoute, default_provider_factory
from stoker.providers.google import GoogleProvider
from stoker.providers.select import select_provider
from stoker.providers.sim.server import create_app, serve_in_background
from tests.provider_rigs import cli_run


def test_run_with_the_google_provider_against_the_served_sim(tmp_path: Path) -> None:
    key = "AIza-cli-end-to-end"
    env = {"GEMINI_API_KEY": key, "STOKER_HOME": str(tmp_path)}
    done, requests = cli_run(
        "google:gemini-2.5-flash",
        tmp_path,
        env,
        url_in="GOOGLE_GEMINI_BASE_URL",
        unset=("GOOGLE_API_KEY",),
    )
    assert done.returncode == 0, done.stderr
    assert "Understood: hi" in done.stdout
    assert requests == 1
    assert key not in done.stdout + done.stderr


def test_chat_with_the_google_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_in_background(create_app()) as served:
        monkeypatch.setenv("GOOGLE_API_KEY", "AIza-chat")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", served.url)
        monkeypatch.setenv("STOKER_HOME", str(tmp_path))
        result = CliRunner().invoke(
            app,
            ["chat", "--provider", "google:gemini-2.5-flash", "--workdir", str(tmp_path)],
            input="hello there\n/exit\n",
        )
    assert result.exit_code == 0, result.output
    assert "Understood: hello there" in result.output


def test_the_google_spec_needs_a_key_and_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="set GOOGLE_API_KEY"):
        select_provider("google:gemini-2.5-flash", config=Config.from_env({}))
    config = Config.from_env({"GOOGLE_API_KEY": "a", "GEMINI_API_KEY": "b"})
    assert config.google_api_key == "a"  # the first one set wins, as google-genai reads them
    assert config.api_key_for("google:gemini-2.5-pro") == "a"
    choice = select_provider("google:gemini-2.5-pro", config=config)
    assert isinstance(choice.provider, GoogleProvider)
    assert choice.model == "gemini-2.5-pro"


def test_the_gateway_builds_a_google_provider_from_its_route() -> None:
    route = ProviderRoute(
        provider="google", model="gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k"
    )
    provider = default_provider_factory(route)
    assert isinstance(provider, GoogleProvider)
    assert provider.base_url == "http://127.0.0.1:9"
