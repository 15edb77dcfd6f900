"""The Telegram tests' rig: the fake Bot API on loopback, bridges on a sim gateway, and
the user's side of a chat (`TelegramChat`, a `platform_checks.Chat`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from stoker.gateway.service import Gateway
from stoker.platforms.bridge import Bridge
from stoker.platforms.telegram.adapter import TelegramAdapter
from stoker.platforms.telegram.settings import TelegramSettings
from tests import fake_platform
from tests.fake_telegram import FakeTelegram
from tests.platform_checks import FakeChat, bridge_on, rig_settings

TOKEN = "123456789:AAE-fake_token_for_tests_only_0123456"
USER = 42
OTHER = 43
Api = fake_platform.Api[FakeTelegram]


@contextmanager
def serving() -> Iterator[Api]:
    with fake_platform.serve(FakeTelegram(token=TOKEN)) as served:
        try:
            yield served
        finally:
            served.fake.closing.set()


@pytest.fixture
def api() -> Iterator[Api]:
    with serving() as served:
        yield served


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def bridge(
    gateway: Gateway,
    url: str,
    *,
    now: Clock | None = None,
    retry_every: float = 60.0,
    **kwargs: Any,
) -> Bridge:
    given = rig_settings(str(USER), {"token": TOKEN, **kwargs})
    s = TelegramSettings(api_url=url, poll_timeout=1, **given)
    adapter = TelegramAdapter(s, retry_pause=0.05)
    return bridge_on(gateway, adapter, s, now=now, retry_every=retry_every)


def serve_config(url: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The environment and `[platforms.telegram]` keys of a `stoker serve` whose bot talks
    to the fake Bot API at `url`."""
    section = {
        "token_env": "BOT_TOKEN",
        "api_url": url,
        "allowed_users": [USER],
        "poll_timeout_seconds": 1,
    }
    return {"BOT_TOKEN": TOKEN}, section


class TelegramChat(FakeChat):
    """The test user's private chat with the bot, on the fake Bot API."""

    platform = "telegram"
    user, other = str(USER), str(OTHER)
    stored = f"{USER}//{USER}"
    silences = True
    update_key = "update_id"

    def __init__(self, api: Api) -> None:
        super().__init__(api, bridge)

    def texts(self) -> list[str]:
        return self.fake.texts()

    def quiet(self) -> list[bool]:
        return [bool(p.get("disable_notification")) for p in self.fake.sent()]

    def edits(self) -> list[str]:
        return [e["text"] for e in self.fake.sent("editMessageText")]

    def notes(self) -> list[str]:
        return [a["text"] for a in self.fake.sent("answerCallbackQuery")]

    def asked(self) -> list[dict[str, Any]]:
        return [p for p in self.fake.posted if p["reply_markup"]]

    def buttons(self, question: dict[str, Any]) -> list[str]:
        return [b["text"] for row in question["reply_markup"]["inline_keyboard"] for b in row]

    def check_questions(self) -> None:
        for question in self.asked():  # one row of buttons under the question
            assert len(question["reply_markup"]["inline_keyboard"]) == 1
