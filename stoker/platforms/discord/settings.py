"""`[platforms.discord]`: checked and resolved once, at load.

    [platforms.discord]
    token_env = "DISCORD_BOT_TOKEN"   # or token_file
    allowed_users = ["80351110224678912"]    # Discord user ids (snowflakes); "*" for everyone
    allowed_chats = ["1234567890123456789"]  # channel (or thread) ids whose members may all talk
    allowed_servers = ["123..."]             # server (guild) ids: every channel in them

The bot token is kept out of every repr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from stoker.errors import ConfigError
from stoker.platforms.access import EVERYONE, Allowlist, RateLimit
from stoker.platforms.section import ChatSection, read_secret

DISCORD_API = "https://discord.com/api/v10"
_SNOWFLAKE = re.compile(r"^\d{1,20}$")


class DiscordSection(ChatSection):
    token_env: str | None = None
    token_file: str | None = None
    api_url: str = DISCORD_API  # another REST base (a test's fake, a rate-limit proxy)
    allowed_users: list[int | str] = Field(default_factory=list)
    allowed_chats: list[int | str] = Field(default_factory=list)
    allowed_servers: list[int | str] = Field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscordSettings:
    token: str = field(repr=False)
    api_url: str = DISCORD_API
    allowlist: Allowlist = field(default_factory=Allowlist)
    rate: RateLimit = field(default_factory=RateLimit)


def _snowflakes(what: str, ids: list[int | str]) -> frozenset[str]:
    out = frozenset(str(i).strip() for i in ids)
    bad = sorted(i for i in out if i != EVERYONE and not _SNOWFLAKE.match(i))
    if bad:
        raise ConfigError(
            f"platforms.discord: {what} holds {bad[0]!r}, not a Discord id: turn on Developer "
            "Mode in Discord's settings, then right-click the user, channel or server and "
            "Copy ID"
        )
    return out


def resolve(s: DiscordSection, env: Mapping[str, str], base: Path) -> DiscordSettings:
    token = read_secret("discord", env_name=s.token_env, file=s.token_file, env=env, base=base)
    if token.lower().startswith("bot ") or not re.fullmatch(r"[A-Za-z0-9_.-]{50,100}", token):
        raise ConfigError(
            "platforms.discord: the token does not look like a bot token (three parts "
            "separated by dots, without a 'Bot ' prefix): copy it from your application's "
            "Bot page in the Discord Developer Portal"
        )
    users = _snowflakes("allowed_users", s.allowed_users)
    chats = _snowflakes("allowed_chats", s.allowed_chats)
    servers = _snowflakes("allowed_servers", s.allowed_servers)
    if EVERYONE in chats | servers:
        raise ConfigError(
            'platforms.discord: "*" is for allowed_users (everyone); list channels and '
            "servers by id"
        )
    return DiscordSettings(
        token=token,
        api_url=s.api_url.rstrip("/"),
        allowlist=Allowlist(users=users, chats=chats | servers),
        rate=s.rate,
    )
