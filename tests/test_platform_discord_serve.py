"""Discord from `stoker serve`'s config: the bot starts with the gateway, answers, and
its token reaches no log line, database file or error; a token Discord refuses fails
the start with an error that says what to do."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stoker.store.base import SqlEventStore
from tests.discord_rig import TOKEN, Api, api, bridge
from tests.fake_discord import USER
from tests.platform_checks import assert_secrets_kept, assert_start_refused, served
from tests.test_gateway_support import make_rig

__all__ = ["api"]


async def test_serve_config_starts_the_bot_and_the_token_is_never_logged_or_stored(
    tmp_path: Path, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"DISCORD_BOT_TOKEN": TOKEN}
    with served(
        tmp_path,
        caplog,
        "discord",
        env,
        token_env="DISCORD_BOT_TOKEN",
        api_url=f"{api.url}/api/v10",
        allowed_users=[str(USER)],
    ) as gateway:
        await api.fake.wait_for(lambda: api.fake.connected)
        api.fake.user_message("hello from the served gateway")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert [m["content"] for m in api.fake.sent()] == ["Understood: hello from the served gateway"]
    assert "GET" in caplog.text  # discord.py logged its requests and the gateway's payloads
    assert_secrets_kept(gateway, tmp_path, caplog, TOKEN)


async def test_a_rejected_token_fails_the_start_without_showing_it(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "MTk4NjIyNDgzNDcxOTI1MjQ4.Gwrong.not-the-bot-token-but-one-of-the-right-shape"
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, token=wrong)
    await assert_start_refused(b, "Discord refused the bot token", wrong, caplog)
    assert api.fake.identified == []  # it never reached the gateway connection
