"""`[platforms.telegram]`: checked and resolved once, at load.

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

The secrets (the bot token, the webhook secret) are kept out of every repr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field

from stoker.errors import ConfigError
from stoker.platforms.access import Allowlist, RateLimit
from stoker.platforms.section import ChatSection, allowlist, read_secret

TELEGRAM_API = "https://api.telegram.org"
WEBHOOK_PATH = "/platforms/telegram"
_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what Telegram accepts as a secret_token


class TelegramSection(ChatSection):
    mode: Literal["polling", "webhook"] = "polling"
    token_env: str | None = None
    token_file: str | None = None
    api_url: str = TELEGRAM_API  # another Bot API server (a local one, a test's fake)
    allowed_users: list[int | str] = Field(default_factory=list)
    allowed_chats: list[int | str] = Field(default_factory=list)
    poll_timeout_seconds: int = Field(default=30, ge=0, le=50)
    webhook_url: str | None = None
    webhook_path: str = WEBHOOK_PATH
    webhook_secret_env: str | None = None


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


def resolve(s: TelegramSection, env: Mapping[str, str], base: Path) -> TelegramSettings:
    token = read_secret("telegram", env_name=s.token_env, file=s.token_file, env=env, base=base)
    if not re.fullmatch(r"\d+:[A-Za-z0-9_-]+", token):
        raise ConfigError(
            "platforms.telegram: the token does not look like a bot token (digits, a colon, "
            "then letters), as @BotFather gives it"
        )
    secret = _webhook_secret(s, env) if s.mode == "webhook" else None
    if not s.webhook_path.startswith("/"):
        raise ConfigError("platforms.telegram: webhook_path must start with /")
    return TelegramSettings(
        token=token,
        mode=s.mode,
        api_url=s.api_url.rstrip("/"),
        allowlist=allowlist(s.allowed_users, s.allowed_chats),
        rate=s.rate,
        poll_timeout=s.poll_timeout_seconds,
        webhook_url=s.webhook_url,
        webhook_path=s.webhook_path,
        webhook_secret=secret,
    )


def _webhook_secret(s: TelegramSection, env: Mapping[str, str]) -> str:
    """What a webhook needs: a public https URL, and the secret Telegram sends back."""
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
    return secret
