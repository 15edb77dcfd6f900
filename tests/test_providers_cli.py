"""`stoker run --provider ...` end to end: a real process, a real SDK, the served simulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from stoker.cli import app
from stoker.providers.sim.server import create_app, serve_in_background


def test_run_with_the_anthropic_provider_against_the_served_sim(tmp_path: Path) -> None:
    key = "sk-cli-end-to-end"
    with serve_in_background(create_app()) as served:
        env = {**os.environ, "ANTHROPIC_BASE_URL": served.url, "ANTHROPIC_API_KEY": key}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "stoker",
                "run",
                "--provider",
                "anthropic:claude-sonnet-4-6",
                "--workdir",
                str(tmp_path),
                "hi",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        stats = httpx.get(served.url + "/stats", headers={"x-api-key": key}).json()
    assert done.returncode == 0, done.stderr
    assert "Understood: hi" in done.stdout
    assert "calls" in done.stdout
    assert stats["keys"][stats["you"]]["models"]["claude-sonnet-4-6"]["requests"] == 1


def test_run_without_the_key_says_which_variable_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["run", "--provider", "openai:gpt-5.5", "hi"])
    assert result.exit_code == 1
    assert "set OPENAI_API_KEY" in result.output
