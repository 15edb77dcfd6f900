"""The gateway as a newcomer meets it: `stoker serve` prints an example config that is a
real small agent (its second message reads the cache), and a gateway that starts on a
store the CLI also uses watches only its own sessions."""

from __future__ import annotations

import dataclasses
import logging
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from stoker.cache.models import model_info
from stoker.cli import app
from stoker.gateway.auth import token_digest
from stoker.gateway.config import GatewayConfig, load_config
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.store.sqlite import SQLiteStore
from tests.helpers import sim_agent
from tests.test_gateway_support import make_rig

TOKEN = "a-token-for-alice-4f1c"


def _printed_example(tmp_path: Path) -> Path:
    """What `stoker serve` prints with no users, saved as a user would save it, with the
    placeholder replaced by their token's digest and a note in the workspace folder."""
    out = CliRunner().invoke(app, ["serve"], env={"STOKER_GATEWAY_TOKENS": ""})
    assert out.exit_code == 1
    example = out.output[: out.output.index("error:")]
    config = tmp_path / "gateway.toml"
    config.write_text(example.replace("REPLACE-WITH-THE-SHA256-OF-A-TOKEN", token_digest(TOKEN)))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "plan.md").write_text("We ship on Friday, after the review.\n")
    return config


def test_the_printed_example_is_an_agent_with_tools_a_prompt_and_keep_warm(
    tmp_path: Path,
) -> None:
    config = load_config(_printed_example(tmp_path), env={})
    assert config.keep_warm is True
    assert config.workspace == tmp_path / "notes"
    assert "workspace assistant" in config.defaults.system
    parsed = tomllib.loads((tmp_path / "gateway.toml").read_text())
    assert parsed["agent"]["system"] == config.defaults.system  # read as written: no escapes


def _one_session(config: GatewayConfig, *texts: str) -> list[dict[str, Any]]:
    """The replies of a gateway serving `config` to `texts`, in order, in one new session."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    app = build_app(config, build_gateway(config))
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
        made = c.post("/v1/sessions", headers=auth)
        assert made.status_code in (200, 201), made.text
        sid = made.json()["id"]
        replies = []
        for text in texts:
            sent = c.post(f"/v1/sessions/{sid}/messages", headers=auth, json={"text": text})
            assert sent.status_code == 200, sent.text
            replies.append(sent.json())
    return replies


def test_the_second_message_with_the_printed_example_reads_its_prompt_from_the_cache(
    tmp_path: Path,
) -> None:
    config = load_config(_printed_example(tmp_path), env={})
    config = dataclasses.replace(config, database=str(tmp_path / "gateway.db"))
    replies = _one_session(config, "What files are in the workspace?", "And when do we ship?")
    first, second = (reply["requests"][0] for reply in replies)
    minimum = model_info(config.defaults.model).min_cacheable
    # The first message writes the prefix (above the minimum, so it is cached at all)...
    assert first["explanation"]["verdict"] != "below_minimum"
    assert first["usage"]["written"] > minimum
    # ...and the second reads most of what it sends from the cache.
    usage = second["usage"]
    assert second["explanation"]["verdict"] == "hit"
    assert usage["read"] >= first["usage"]["written"] > minimum
    assert usage["read"] > 0.9 * usage["input_total"]


def test_a_gateway_with_no_agent_table_serves_the_printed_examples_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no file: the workspace is `notes` in the working directory
    bare = load_config(None, env={})
    example = load_config(_printed_example(tmp_path), env={})
    assert bare.defaults == example.defaults
    assert bare.workspace == example.workspace == tmp_path / "notes"
    assert bare.keep_warm is example.keep_warm is True
    assert example.defaults.provider == "sim"
    # an [agent] table describes its agent whole: no workspace unless it names one
    (tmp_path / "own.toml").write_text('[agent]\nmodel = "claude-sonnet-4-6"\n')
    assert load_config(tmp_path / "own.toml", env={}).workspace is None


def test_the_readme_gateway_with_no_config_reads_its_prefix_from_the_second_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`STOKER_GATEWAY_TOKENS=alice=alice-secret stoker serve`, then the README's curl
    message twice in one session: the second reads the prefix the first wrote."""
    monkeypatch.chdir(tmp_path)
    env = {"STOKER_GATEWAY_TOKENS": f"alice={TOKEN}", "STOKER_HOME": str(tmp_path / "home")}
    config = load_config(None, env=env)
    replies = _one_session(config, "Hello! What can you do?", "Hello! What can you do?")
    first, second = (reply["requests"][0] for reply in replies)
    assert first["usage"]["written"] > model_info(config.defaults.model).min_cacheable
    assert second["explanation"]["verdict"] == "hit"
    assert second["usage"]["read"] >= first["usage"]["written"]
    assert replies[1]["usage"]["read"] > 0  # what the README's `jq '{text, usage, ...}'` shows


async def test_a_gateway_start_reschedules_its_own_sessions_and_leaves_the_cli_ones(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "shared.db")
    cli_agent, _ = sim_agent(name="stoker-cli")  # what `stoker chat` stores
    cli = await cli_agent.open(store, "demo1")
    await cli.send("hello from the terminal")
    rig = make_rig(store)
    own = await rig.gateway.create_session("alice")
    await rig.gateway.send("alice", own, "read_file 'notes.md'")
    await rig.gateway.close()  # the process stops; the store and the provider's cache stay

    again = rig.another_process(SQLiteStore(tmp_path / "shared.db"))
    try:
        with caplog.at_level(logging.WARNING, logger="stoker"):
            await again.start()
        assert own in again.keep_warm.scheduler
        assert "demo1" not in again.keep_warm.scheduler
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert again.agents.peek("demo1") is None  # not even rebuilt to be looked at
    finally:
        await again.close()
        await store.close()
