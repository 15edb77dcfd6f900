"""The Discord tests' rig: the fake Discord (REST and gateway) on loopback, bridges on a
sim gateway, and the user's side of a chat (`DiscordChat`, a `platform_checks.Chat`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from stoker.gateway.service import Gateway
from stoker.platforms.bridge import Bridge
from stoker.platforms.discord.adapter import DiscordAdapter
from stoker.platforms.discord.settings import DiscordSettings
from tests import fake_platform
from tests.fake_discord import DM, USER, FakeDiscord
from tests.platform_checks import FakeChat, bridge_on, rig_settings

TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GfakeT.fake-token-for-tests-only-0123456789abcdef"
OTHER = 43
SILENT = 4096  # Discord's SUPPRESS_NOTIFICATIONS flag
NO_EMBEDS = 4  # SUPPRESS_EMBEDS
EPHEMERAL = 64
Api = fake_platform.Api[FakeDiscord]


def serving() -> AbstractContextManager[Api]:
    return fake_platform.serve(FakeDiscord(token=TOKEN))


@pytest.fixture
def api() -> Iterator[Api]:
    with serving() as served:
        yield served


def bridge(gateway: Gateway, url: str, *, retry_every: float = 60.0, **kwargs: Any) -> Bridge:
    given = rig_settings(str(USER), {"token": TOKEN, **kwargs})
    s = DiscordSettings(api_url=f"{url}/api/v10", **given)
    return bridge_on(gateway, DiscordAdapter(s), s, retry_every=retry_every)


def serve_config(url: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The environment and `[platforms.discord]` keys of a `stoker serve` whose bot talks
    to the fake Discord at `url`."""
    section = {
        "token_env": "DISCORD_BOT_TOKEN",
        "api_url": f"{url}/api/v10",
        "allowed_users": [str(USER)],
    }
    return {"DISCORD_BOT_TOKEN": TOKEN}, section


def seen(content: str) -> str:
    """A message as Discord shows it: a backslash escape shows the character alone."""
    return re.sub(r"\\(.)", r"\1", content)


class DiscordChat(FakeChat):
    """The test user's direct messages with the bot, on the fake Discord."""

    platform = "discord"
    user, other = str(USER), str(OTHER)
    stored = f"{DM}//{USER}"
    silences = True
    update_key = "id"

    def __init__(self, api: Api) -> None:
        super().__init__(api, bridge)

    def texts(self) -> list[str]:
        return [seen(text) for text in self.fake.texts()]

    def quiet(self) -> list[bool]:
        return [bool(m.get("flags", 0) & SILENT) for m in self.fake.sent()]

    def edits(self) -> list[str]:
        return [seen(str(e["content"])) for e in self.fake.sent("edit_message")]

    def notes(self) -> list[str]:
        return [c["data"]["content"] for c in self.fake.sent("interaction_callback")]

    def asked(self) -> list[dict[str, Any]]:
        return list(self.fake.asked)

    def buttons(self, question: dict[str, Any]) -> list[str]:
        return [b["label"] for b in question["components"][0]["components"]]

    def check_questions(self) -> None:
        for question in self.asked():  # the first choice is the primary button
            styles = [b["style"] for b in question["components"][0]["components"]]
            assert styles == [1] + [2] * (len(styles) - 1)
        # a note is seen only by who pressed; an answered question loses its buttons
        notes = self.fake.sent("interaction_callback")
        assert all(c["type"] == 4 and c["data"]["flags"] == EPHEMERAL for c in notes)
        assert all(e["components"] == [] for e in self.fake.sent("edit_message"))
