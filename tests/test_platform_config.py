"""`[platforms.*]` in `stoker serve`'s config file: checked at load with errors that say
what to fix, secrets read from the environment or a file and never shown; the gateway
reading the same file lets the tables be."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from stoker.cli import app
from stoker.errors import ConfigError
from stoker.gateway.config import load_config
from stoker.platforms.access import Allowlist, RateLimit
from stoker.platforms.base import ChatKey
from stoker.platforms.config import PlatformSettings
from stoker.platforms.slack.settings import SlackSettings
from stoker.platforms.telegram.settings import TelegramSettings
from tests.platform_checks import load_section
from tests.slack_rig import APP_TOKEN, SIGNING_SECRET
from tests.slack_rig import TOKEN as SLACK_TOKEN

TOKEN = "123456789:AAE-secret_token_value_0123456789"
SECRET = "webhook-secret_0123"
DISCORD_TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GsecrT.discord-secret-token-value-0123456789abc"
# Every platform's secrets, in the environment a section names them in.
ENV = {"TG": TOKEN, "DC": DISCORD_TOKEN, "BOT": SLACK_TOKEN, "SIGNING": SIGNING_SECRET}
SECRETS = (TOKEN, SECRET, DISCORD_TOKEN, SLACK_TOKEN, SIGNING_SECRET, APP_TOKEN)


def _load(
    tmp_path: Path, platform: str, section: str, env: dict[str, str] | None = None
) -> PlatformSettings:
    return load_section(tmp_path, platform, section, {**ENV, "APP": APP_TOKEN, **(env or {})})


def test_a_telegram_section_resolves_with_its_token_from_the_environment(tmp_path: Path) -> None:
    platforms = _load(
        tmp_path,
        "telegram",
        'token_env = "TG"\nallowed_users = [42, "7"]\nallowed_chats = [-100]\n'
        "rate_per_minute = 6\nburst = 2",
    )
    assert platforms == PlatformSettings(
        telegram=TelegramSettings(
            token=TOKEN,
            allowlist=Allowlist(users=frozenset({"42", "7"}), chats=frozenset({"-100"})),
            rate=RateLimit(per_minute=6, burst=2),
        )
    )
    assert TOKEN not in repr(platforms)
    # the gateway reads the same file, leaves the platforms' tables be, and shows no token
    assert TOKEN not in repr(load_config(tmp_path / "gateway.toml", env={"TG": TOKEN}))


def test_the_token_may_come_from_a_file_and_nobody_is_allowed_by_default(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    platforms = _load(tmp_path, "telegram", 'token_file = "token"')
    assert platforms.telegram is not None
    assert platforms.telegram.token == TOKEN
    assert platforms.telegram.allowlist == Allowlist()


def test_a_webhook_reads_its_secret_from_the_environment(tmp_path: Path) -> None:
    platforms = _load(
        tmp_path,
        "telegram",
        'token_env = "TG"\nmode = "webhook"\nwebhook_url = "https://bot.example/tg"\n'
        'webhook_secret_env = "HOOK"',
        {"HOOK": SECRET},
    )
    assert platforms.telegram is not None
    assert (platforms.telegram.mode, platforms.telegram.webhook_secret) == ("webhook", SECRET)
    assert SECRET not in repr(platforms)


def test_a_slack_section_resolves_with_its_secrets_from_the_environment_or_a_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "signing").write_text(SIGNING_SECRET + "\n", encoding="utf-8")
    platforms = _load(
        tmp_path,
        "slack",
        'token_env = "BOT"\nsigning_secret_file = "signing"\nallowed_users = ["U1", "U2"]\n'
        'allowed_chats = ["C1"]\nrate_per_minute = 6\nburst = 2',
    )
    assert platforms == PlatformSettings(
        slack=SlackSettings(
            token=SLACK_TOKEN,
            signing_secret=SIGNING_SECRET,
            allowlist=Allowlist(users=frozenset({"U1", "U2"}), chats=frozenset({"C1"})),
            rate=RateLimit(per_minute=6, burst=2),
        )
    )
    assert platforms.names == ("slack",)
    assert SLACK_TOKEN not in repr(platforms)
    assert SIGNING_SECRET not in repr(platforms)
    socket = _load(tmp_path, "slack", 'mode = "socket"\ntoken_env = "BOT"\napp_token_env = "APP"')
    assert socket.slack is not None
    assert (socket.slack.mode, socket.slack.app_token) == ("socket", APP_TOKEN)
    assert socket.slack.signing_secret is None
    assert APP_TOKEN not in repr(socket)
    assert _load(tmp_path, "slack", 'token_env = "BOT"\nsigning_secret_env = "SIGNING"').slack == (
        SlackSettings(token=SLACK_TOKEN, signing_secret=SIGNING_SECRET)  # nobody by default
    )


def test_a_discord_section_allows_users_channels_and_whole_servers(tmp_path: Path) -> None:
    platforms = _load(
        tmp_path,
        "discord",
        'token_env = "DC"\nallowed_users = [80351110224678912]\n'
        'allowed_chats = ["1100000000000000006"]\nallowed_servers = ["1100000000000000005"]',
    )
    assert platforms.names == ("discord",)
    assert platforms.discord is not None
    allow = platforms.discord.allowlist
    assert allow == Allowlist(
        users=frozenset({"80351110224678912"}),
        chats=frozenset({"1100000000000000006", "1100000000000000005"}),
    )
    member = ChatKey(platform="discord", chat="999", user="5", space="1100000000000000005")
    assert allow.allows(member)  # any channel of an allowed server
    assert not allow.allows(ChatKey(platform="discord", chat="999", user="5"))  # a DM
    assert DISCORD_TOKEN not in repr(platforms)


TELEGRAM_HOOK = 'token_env = "TG"\nmode = "webhook"\nwebhook_url = "https://b.example/x"'
SLACK_EVENTS = 'token_env = "BOT"\nsigning_secret_env = "SIGNING"'


@pytest.mark.parametrize(
    ("platform", "section", "env", "fragment"),
    [
        ("telegram", "", {}, "give exactly one of token_env"),
        ("telegram", 'token_env = "TG"\ntoken_file = "x"', {}, "give exactly one of token_env"),
        ("telegram", 'token_env = "MISSING"', {}, "the environment variable MISSING is not set"),
        ("telegram", 'token_file = "nope"', {}, "cannot read token_file"),
        ("telegram", 'token_env = "BAD"', {"BAD": "not a token"}, "does not look like a bot token"),
        (
            "telegram",
            'token_env = "TG"\nmode = "webhook"',
            {},
            'mode = "webhook" needs webhook_url',
        ),
        ("telegram", TELEGRAM_HOOK, {}, "needs webhook_secret_env"),
        (
            "telegram",
            TELEGRAM_HOOK + '\nwebhook_secret_env = "HOOK"',
            {"HOOK": "has spaces"},
            "must be 1-256 characters",
        ),
        ("telegram", 'token_env = "TG"\nmode = "push"', {}, "platforms.telegram.mode"),
        ("telegram", 'token_env = "TG"\ntoken = "x"', {}, "platforms.telegram.token: Extra inputs"),
        ("telegram", 'token_env = "TG"\nburst = 0', {}, "platforms.telegram.burst"),
        ("slack", 'signing_secret_env = "SIGNING"', {}, "give exactly one of token_env"),
        ("slack", 'token_env = "BOT"', {}, "give exactly one of signing_secret_env"),
        (
            "slack",
            SLACK_EVENTS + '\nsigning_secret_file = "x"',
            {},
            "give exactly one of signing_secret_env",
        ),
        (
            "slack",
            'token_env = "BOT"\nsigning_secret_file = "nope"',
            {},
            "cannot read signing_secret_file",
        ),
        ("slack", 'token_env = "BOT"\nsigning_secret_env = "UNSET"', {}, "UNSET is not set"),
        (
            "slack",
            'token_env = "USER"\nsigning_secret_env = "SIGNING"',
            {"USER": "xoxp-1"},
            "(xoxb-...)",
        ),
        ("slack", 'mode = "socket"\ntoken_env = "BOT"', {}, "give exactly one of app_token_env"),
        ("slack", 'mode = "socket"\ntoken_env = "BOT"\napp_token_env = "BOT"', {}, "(xapp-...)"),
        ("slack", 'mode = "rtm"\ntoken_env = "BOT"', {}, "platforms.slack.mode"),
        ("slack", SLACK_EVENTS + '\npath = "x"', {}, "start with /"),
        ("discord", "", {}, "give exactly one of token_env"),
        (
            "discord",
            'token_env = "BAD"',
            {"BAD": "Bot " + DISCORD_TOKEN},
            "without a 'Bot ' prefix",
        ),
        ("discord", 'token_env = "BAD"', {"BAD": "short"}, "does not look like a bot token"),
        (
            "discord",
            'token_env = "DC"\nallowed_users = ["@alice"]',
            {},
            "'@alice', not a Discord id",
        ),
        ("discord", 'token_env = "DC"\nallowed_servers = ["*"]', {}, '"*" is for allowed_users'),
        (
            "discord",
            'token_env = "DC"\nmode = "socket"',
            {},
            "platforms.discord.mode: Extra inputs",
        ),
        ("mastodon", "", {}, "platforms.mastodon: Extra inputs"),
    ],
)
def test_bad_platform_settings_say_what_to_fix_and_never_show_a_secret(
    tmp_path: Path, platform: str, section: str, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=rf"platforms\.{platform}") as caught:
        _load(tmp_path, platform, section, env)
    assert fragment in str(caught.value)
    for secret in SECRETS:
        assert secret not in str(caught.value)


def test_serve_help_shows_the_platforms_sections() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for phrase in (
        "[platforms.telegram] starts a Telegram bot",
        "pip install 'stoker[telegram]'",
        'mode = "polling" (the default) or "webhook"',
        "token_env or token_file",
        "allowed_users, allowed_chats: who is answered (default: nobody)",
        "[platforms.slack] starts a Slack app; pip install 'stoker[slack]'",
        'mode = "events" (the default; Slack posts to /platforms/slack/events) or "socket"',
        "signing_secret_env or signing_secret_file",
        "app_token_env or app_token_file",
        "[platforms.discord] starts a Discord bot",
        "pip install 'stoker[discord]'",
        "allowed_servers (Discord): server ids",
        '[memory] directory = "memory" gives each user their own memory',
    ):
        assert phrase in text
