"""The `[platforms.*]` tables of `stoker serve`'s config file, checked and resolved once.

The gateway reads the same file and lets these tables be (`gateway.config.read_tables`);
each platform's section is its own module (`telegram.settings`, `slack.settings`,
`discord.settings`), with the example that documents it. Secrets come from the
environment or a file, never from the config file itself, and are kept out of every
repr, log line and error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from stoker.errors import ConfigError
from stoker.gateway.config import problems, read_tables
from stoker.platforms.discord import settings as discord_settings
from stoker.platforms.discord.settings import DiscordSection, DiscordSettings
from stoker.platforms.slack import settings as slack_settings
from stoker.platforms.slack.settings import SlackSection, SlackSettings
from stoker.platforms.telegram import settings as telegram_settings
from stoker.platforms.telegram.settings import TelegramSection, TelegramSettings


class PlatformsSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    telegram: TelegramSection | None = None
    slack: SlackSection | None = None
    discord: DiscordSection | None = None


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


def resolve(s: PlatformsSection, *, env: Mapping[str, str], base: Path) -> PlatformSettings:
    """The platforms as configured, with their secrets read (ConfigError when unusable)."""
    return PlatformSettings(
        telegram=telegram_settings.resolve(s.telegram, env, base) if s.telegram else None,
        slack=slack_settings.resolve(s.slack, env, base) if s.slack else None,
        discord=discord_settings.resolve(s.discord, env, base) if s.discord else None,
    )


def load_platforms(path: str | Path | None, *, env: Mapping[str, str]) -> PlatformSettings:
    """The platforms the config file at `path` sets up (None: no file, so none), their
    secrets read from `env` or the files it names (ConfigError when unusable)."""
    raw, base = read_tables(path)
    try:
        section = PlatformsSection.model_validate(raw.get("platforms", {}))
    except ValidationError as exc:
        raise ConfigError(f"gateway config {path}: {problems(exc, under='platforms')}") from None
    return resolve(section, env=env, base=base)
