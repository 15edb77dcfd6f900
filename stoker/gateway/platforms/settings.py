"""The `[platforms.*]` sections of the gateway config, checked and resolved once.

    [platforms.telegram]
    mode = "polling"                  # or "webhook"
    token_env = "TELEGRAM_BOT_TOKEN"  # or token_file = "/run/secrets/telegram" (first line)
    allowed_users = [123456789]       # Telegram user ids; "*" for everyone. Default: nobody
    allowed_chats = [-1001234567890]  # group ids whose members may all talk to the bot
    rate_per_minute = 20              # per chat, on average (0: no limit) ...
    burst = 5                         # ... and at once
    # mode = "webhook" also needs:
    webhook_url = "https://bot.example.com/platforms/telegram"  # public URL of the route
    webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET"  # Telegram sends it back in a header

Secrets (the bot token, the webhook secret) come from the environment or a file, never
from the config file itself; they are kept out of every repr, log line and error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from stoker.errors import ConfigError
from stoker.gateway.platforms.access import EVERYONE, Allowlist, RateLimit

TELEGRAM_API = "https://api.telegram.org"
WEBHOOK_PATH = "/platforms/telegram"
_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what Telegram accepts as a secret_token


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _ChatSection(_Strict):
    """What every platform's section has: how fast each chat may send."""

    rate_per_minute: float = Field(default=20.0, ge=0)
    burst: int = Field(default=5, ge=1)

    @property
    def rate(self) -> RateLimit:
        return RateLimit(per_minute=self.rate_per_minute, burst=self.burst)


class TelegramSection(_ChatSection):
    mode: Literal["polling", "webhook"] = "polling"
    token_env: str | None = None
    token_file: str | None = None
    api_url: str = TELEGRAM_API  # another Bot API server (a local one, a test's fake)
    allowed_users: list[int | str] = []
    allowed_chats: list[int | str] = []
    poll_timeout_seconds: int = Field(default=30, ge=0, le=50)
    webhook_url: str | None = None
    webhook_path: str = WEBHOOK_PATH
    webhook_secret_env: str | None = None


class PlatformsSection(_Strict):
    telegram: TelegramSection | None = None
    slack: SlackSection | None = None
    discord: DiscordSection | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TelegramSettings:
    token: str = field(repr=False)
    mode: Literal["polling", "webhook"] = "polling"
    api_url: str = TELEGRAM_API
    allowlist: Allowlist = field(default_factory=Allowlist)
    rate: RateLimit = field(default_factory=RateLimit)
    poll_timeout: int = 30
    webhook_url: str | None = None
    webhook_path: str = WEBHOOK_PATH
    webhook_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformSettings:
    """Every configured platform (None: not configured)."""

    telegram: TelegramSettings | None = None
    slack: SlackSettings | None = None
    discord: DiscordSettings | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(
            name for name in ("telegram", "slack", "discord") if getattr(self, name) is not None
        )


def _secret(
    what: str,
    *,
    env_name: str | None,
    file: str | None,
    env: Mapping[str, str],
    base: Path,
    keys: str = "token",
) -> str:
    if (env_name is None) == (file is None):
        raise ConfigError(
            f"platforms.{what}: give exactly one of {keys}_env (an environment variable's "
            f"name) or {keys}_file (a file holding it)"
        )
    if env_name is not None:
        value = env.get(env_name, "").strip()
        if not value:
            raise ConfigError(f"platforms.{what}: the environment variable {env_name} is not set")
        return value
    assert file is not None
    path = Path(file).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
    except OSError as exc:
        raise ConfigError(
            f"platforms.{what}: cannot read {keys}_file {path}: {exc.strerror}"
        ) from None
    if not lines or not lines[0].strip():
        raise ConfigError(f"platforms.{what}: {keys}_file {path} is empty")
    return lines[0].strip()


def _telegram(s: TelegramSection, env: Mapping[str, str], base: Path) -> TelegramSettings:
    token = _secret("telegram", env_name=s.token_env, file=s.token_file, env=env, base=base)
    if not re.fullmatch(r"\d+:[A-Za-z0-9_-]+", token):
        raise ConfigError(
            "platforms.telegram: the token does not look like a bot token (digits, a colon, "
            "then letters), as @BotFather gives it"
        )
    secret = None
    if s.mode == "webhook":
        if not s.webhook_url or not s.webhook_url.startswith("https://"):
            raise ConfigError(
                'platforms.telegram: mode = "webhook" needs webhook_url, the public https '
                f"URL where Telegram posts updates (served at {s.webhook_path})"
            )
        if not s.webhook_secret_env or not env.get(s.webhook_secret_env):
            raise ConfigError(
                'platforms.telegram: mode = "webhook" needs webhook_secret_env naming a set '
                "environment variable: the secret Telegram sends with every update"
            )
        secret = env[s.webhook_secret_env]
        if not _SECRET.match(secret):
            raise ConfigError(
                f"platforms.telegram: {s.webhook_secret_env} must be 1-256 characters of "
                "A-Z, a-z, 0-9, _ and -"
            )
    if not s.webhook_path.startswith("/"):
        raise ConfigError("platforms.telegram: webhook_path must start with /")
    return TelegramSettings(
        token=token,
        mode=s.mode,
        api_url=s.api_url.rstrip("/"),
        allowlist=Allowlist(
            users=frozenset(str(u) for u in s.allowed_users),
            chats=frozenset(str(c) for c in s.allowed_chats),
        ),
        rate=s.rate,
        poll_timeout=s.poll_timeout_seconds,
        webhook_url=s.webhook_url,
        webhook_path=s.webhook_path,
        webhook_secret=secret,
    )


def resolve(section: PlatformsSection, *, env: Mapping[str, str], base: Path) -> PlatformSettings:
    """The platforms as configured, with their secrets read (ConfigError when unusable)."""
    return PlatformSettings(
        telegram=_telegram(section.telegram, env, base) if section.telegram else None,
        slack=_slack(section.slack, env, base) if section.slack else None,
        discord=_discord(section.discord, env, base) if section.discord else None,
    )


# -- Slack ----------------------------------------------------------------------------------
#
#     [platforms.slack]
#     mode = "events"                          # or "socket" (Socket Mode)
#     token_env = "SLACK_BOT_TOKEN"            # xoxb-...; or token_file
#     signing_secret_env = "SLACK_SIGNING_SECRET"  # events mode; or signing_secret_file
#     app_token_env = "SLACK_APP_TOKEN"        # socket mode: xapp-...; or app_token_file
#     allowed_users = ["U0123ABCD"]            # Slack user ids; "*" for everyone
#     allowed_chats = ["C0123ABCD"]            # channel ids whose members may all talk

SLACK_API = "https://slack.com/api"
SLACK_PATH = "/platforms/slack"


class SlackSection(_ChatSection):
    mode: Literal["events", "socket"] = "events"
    token_env: str | None = None
    token_file: str | None = None
    signing_secret_env: str | None = None
    signing_secret_file: str | None = None
    app_token_env: str | None = None
    app_token_file: str | None = None
    api_url: str = SLACK_API  # another Web API base (a test's fake)
    allowed_users: list[str] = []
    allowed_chats: list[str] = []
    path: str = SLACK_PATH  # events at PATH/events, buttons at PATH/actions, PATH/commands


@dataclass(frozen=True, slots=True, kw_only=True)
class SlackSettings:
    token: str = field(repr=False)
    mode: Literal["events", "socket"] = "events"
    signing_secret: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    api_url: str = SLACK_API
    allowlist: Allowlist = field(default_factory=Allowlist)
    rate: RateLimit = field(default_factory=RateLimit)
    path: str = SLACK_PATH


def _slack(s: SlackSection, env: Mapping[str, str], base: Path) -> SlackSettings:
    token = _secret("slack", env_name=s.token_env, file=s.token_file, env=env, base=base)
    if not token.startswith("xoxb-"):
        raise ConfigError(
            "platforms.slack: the token is not a bot token (xoxb-...): take the Bot User "
            "OAuth Token from your app's OAuth & Permissions page"
        )
    signing_secret = app_token = None
    if s.mode == "events":
        signing_secret = _secret(
            "slack",
            env_name=s.signing_secret_env,
            file=s.signing_secret_file,
            env=env,
            base=base,
            keys="signing_secret",
        )
    else:
        app_token = _secret(
            "slack",
            env_name=s.app_token_env,
            file=s.app_token_file,
            env=env,
            base=base,
            keys="app_token",
        )
        if not app_token.startswith("xapp-"):
            raise ConfigError(
                'platforms.slack: mode = "socket" needs an app-level token (xapp-...) with '
                "the connections:write scope, from your app's Basic Information page"
            )
    if not s.path.startswith("/"):
        raise ConfigError("platforms.slack: path must start with /")
    return SlackSettings(
        token=token,
        mode=s.mode,
        signing_secret=signing_secret,
        app_token=app_token,
        api_url=s.api_url.rstrip("/"),
        allowlist=Allowlist(users=frozenset(s.allowed_users), chats=frozenset(s.allowed_chats)),
        rate=s.rate,
        path=s.path.rstrip("/"),
    )


# -- Discord --------------------------------------------------------------------------------
#
#     [platforms.discord]
#     token_env = "DISCORD_BOT_TOKEN"   # or token_file
#     allowed_users = ["80351110224678912"]    # Discord user ids (snowflakes); "*" for everyone
#     allowed_chats = ["1234567890123456789"]  # channel (or thread) ids whose members may all talk
#     allowed_servers = ["123..."]             # server (guild) ids: every channel in them

DISCORD_API = "https://discord.com/api/v10"
_SNOWFLAKE = re.compile(r"^\d{1,20}$")


class DiscordSection(_ChatSection):
    token_env: str | None = None
    token_file: str | None = None
    api_url: str = DISCORD_API  # another REST base (a test's fake, a rate-limit proxy)
    allowed_users: list[int | str] = []
    allowed_chats: list[int | str] = []
    allowed_servers: list[int | str] = []


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


def _discord(s: DiscordSection, env: Mapping[str, str], base: Path) -> DiscordSettings:
    token = _secret("discord", env_name=s.token_env, file=s.token_file, env=env, base=base)
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
