"""Discord from `stoker serve`'s config: the bot starts with the gateway, answers, and
its token reaches no log line, database file or error; a token Discord refuses fails
the start with an error that says what to do."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

import pytest

from stoker.errors import ConfigError
from stoker.gateway.config import load_config
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from tests.discord_rig import TOKEN, Api, api, bridge
from tests.fake_discord import USER
from tests.test_gateway_support import make_rig
from tests.test_platform_telegram_http import _files_holding

__all__ = ["api"]


async def test_serve_config_starts_the_bot_and_the_token_is_never_logged_or_stored(
    tmp_path: Path, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    database = tmp_path / "gateway.db"
    config_file = tmp_path / "gateway.toml"
    config_file.write_text(
        f'database = "{database}"\n'
        "[platforms.discord]\n"
        'token_env = "DISCORD_BOT_TOKEN"\n'
        f'api_url = "{api.url}/api/v10"\n'
        f'allowed_users = ["{USER}"]\n',
        encoding="utf-8",
    )
    config = load_config(config_file, env={"DISCORD_BOT_TOKEN": TOKEN})
    rig = make_rig(SQLiteStore(database))
    gateway = build_gateway(config, store=rig.gateway.store, provider_factory=rig.factory)
    with serve_in_thread(build_app(config, gateway)):
        await api.fake.wait_for(lambda: api.fake.connected)
        api.fake.user_message("hello from the served gateway")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert [m["content"] for m in api.fake.sent()] == ["Understood: hello from the served gateway"]
    assert "GET" in caplog.text  # discord.py logged its requests and the gateway's payloads
    assert TOKEN not in caplog.text
    assert _files_holding(tmp_path, "gateway.db", TOKEN) == []
    assert TOKEN not in repr(config)


async def test_a_rejected_token_fails_the_start_without_showing_it(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "MTk4NjIyNDgzNDcxOTI1MjQ4.Gwrong.not-the-bot-token-but-one-of-the-right-shape"
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, token=wrong)
    with pytest.raises(ConfigError, match="Discord refused the bot token") as caught:
        await b.start()
    shown = "".join(traceback.format_exception(caught.value)) + caplog.text
    assert wrong not in shown
    assert api.fake.identified == []  # it never reached the gateway connection
