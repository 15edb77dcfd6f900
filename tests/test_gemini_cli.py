"""`google:` at the command line: `stoker run` and `stoker chat` against the served
simulator in Gemini's wire, keys from GEMINI_API_KEY / GOOGLE_API_KEY; `stoker serve`'s
provider factory; the provider spec and its key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from stoker.cli import app
from stoker.config import Config
from stoker.errors import ConfigError
from stoker.gateway.providers import ProviderRoute, default_provider_factory
from stoker.providers.google import GoogleProvider
from stoker.providers.select import select_provider
from stoker.providers.sim.server import create_app, serve_in_background


def test_run_with_the_google_provider_against_the_served_sim(tmp_path: Path) -> None:
    key = "AIza-cli-end-to-end"
    with serve_in_background(create_app()) as served:
        env = {
            **os.environ,
            "GEMINI_API_KEY": key,
            "GOOGLE_GEMINI_BASE_URL": served.url,
            "STOKER_HOME": str(tmp_path),
        }
        env.pop("GOOGLE_API_KEY", None)
        command = ["run", "--provider", "google:gemini-2.5-flash", "--workdir", str(tmp_path)]
        done = subprocess.run(
            [sys.executable, "-m", "stoker", *command, "hi"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        stats = httpx.get(served.url + "/stats", headers={"x-api-key": key}).json()
    assert done.returncode == 0, done.stderr
    assert "Understood: hi" in done.stdout
    assert stats["keys"][stats["you"]]["models"]["gemini-2.5-flash"]["requests"] == 1
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
