"""`[platforms.slack]`: checked and resolved once, at load.

    [platforms.slack]
    mode = "events"                          # or "socket" (Socket Mode)
    token_env = "SLACK_BOT_TOKEN"            # xoxb-...; or token_file
    signing_secret_env = "SLACK_SIGNING_SECRET"  # events mode; or signing_secret_file
    app_token_env = "SLACK_APP_TOKEN"        # socket mode: xapp-...; or app_token_file
    allowed_users = ["U0123ABCD"]            # Slack user ids; "*" for everyone
    allowed_chats = ["C0123ABCD"]            # channel ids whose members may all talk

The secrets (the bot token, the signing secret, the app token) are kept out of every repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field

from stoker.errors import ConfigError
from stoker.platforms.access import Allowlist, RateLimit
from stoker.platforms.section import ChatSection, allowlist, read_secret

SLACK_API = "https://slack.com/api"
SLACK_PATH = "/platforms/slack"


class SlackSection(ChatSection):
    mode: Literal["events", "socket"] = "events"
    token_env: str | None = None
    token_file: str | None = None
    signing_secret_env: str | None = None
    signing_secret_file: str | None = None
    app_token_env: str | None = None
    app_token_file: str | None = None
    api_url: str = SLACK_API  # another Web API base (a test's fake)
    allowed_users: list[str] = Field(default_factory=list)
    allowed_chats: list[str] = Field(default_factory=list)
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


def resolve(s: SlackSection, env: Mapping[str, str], base: Path) -> SlackSettings:
    def secret(keys: str, env_name: str | None, file: str | None) -> str:
        return read_secret("slack", env_name=env_name, file=file, env=env, base=base, keys=keys)

    token = secret("token", s.token_env, s.token_file)
    if not token.startswith("xoxb-"):
        raise ConfigError(
            "platforms.slack: the token is not a bot token (xoxb-...): take the Bot User "
            "OAuth Token from your app's OAuth & Permissions page"
        )
    signing_secret = app_token = None
    if s.mode == "events":
        signing_secret = secret("signing_secret", s.signing_secret_env, s.signing_secret_file)
    else:
        app_token = secret("app_token", s.app_token_env, s.app_token_file)
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
        allowlist=allowlist(s.allowed_users, s.allowed_chats),
        rate=s.rate,
        path=s.path.rstrip("/"),
    )
