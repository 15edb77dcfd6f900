"""`stoker run --provider ...` end to end: a real process, a real SDK, the served simulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from stoker.cli import app
from stoker.cli.render import SIMULATOR_NOTE
from tests.provider_rigs import cli_run


def test_run_with_the_anthropic_provider_against_the_served_sim(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-cli-end-to-end"}
    done, requests = cli_run(
        "anthropic:claude-sonnet-4-6", tmp_path, env, url_in="ANTHROPIC_BASE_URL"
    )
    assert done.returncode == 0, done.stderr
    assert "Understood: hi" in done.stdout
    assert "calls" in done.stdout
    assert requests == 1
    # a real provider's SDK answered (a served simulator, but not the embedded one): no note
    assert SIMULATOR_NOTE not in done.stdout


def test_run_without_the_key_says_which_variable_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["run", "--provider", "openai:gpt-5.5", "hi"])
    assert result.exit_code == 1
    assert "set OPENAI_API_KEY" in result.output
