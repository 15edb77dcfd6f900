"""`[platforms.*]` in the gateway config: checked at load with errors that say
what to fix, secrets read from the environment or a file and never shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.cli import app
from stoker.errors import ConfigError
from stoker.gateway.config import load_config
from stoker.gateway.platforms.access import Allowlist, RateLimit
from stoker.gateway.platforms.base import ChatKey
from stoker.gateway.platforms.settings import PlatformSettings, TelegramSettings

TOKEN = "123456789:AAE-secret_token_value_0123456789"
SECRET = "webhook-secret_0123"


def _load(tmp_path: Path, section: str, env: dict[str, str] | None = None) -> PlatformSettings:
    path = tmp_path / "gateway.toml"
    path.write_text(f"[platforms.telegram]\n{section}\n", encoding="utf-8")
    return load_config(path, env={"TG": TOKEN, **(env or {})}).platforms


def test_a_telegram_section_resolves_with_its_token_from_the_environment(tmp_path: Path) -> None:
    platforms = _load(
        tmp_path,
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
    assert TOKEN not in repr(load_config(tmp_path / "gateway.toml", env={"TG": TOKEN}))


def test_the_token_may_come_from_a_file_and_nobody_is_allowed_by_default(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    platforms = _load(tmp_path, 'token_file = "token"')
    assert platforms.telegram is not None
    assert platforms.telegram.token == TOKEN
    assert platforms.telegram.allowlist == Allowlist()


def test_a_webhook_reads_its_secret_from_the_environment(tmp_path: Path) -> None:
    platforms = _load(
        tmp_path,
        'token_env = "TG"\nmode = "webhook"\nwebhook_url = "https://bot.example/tg"\n'
        'webhook_secret_env = "HOOK"',
        {"HOOK": SECRET},
    )
    assert platforms.telegram is not None
    assert (platforms.telegram.mode, platforms.telegram.webhook_secret) == ("webhook", SECRET)
    assert SECRET not in repr(platforms)


@pytest.mark.parametrize(
    ("section", "env", "fragment"),
    [
        ("", {}, "give exactly one of token_env"),
        ('token_env = "TG"\ntoken_file = "x"', {}, "give exactly one of token_env"),
        ('token_env = "MISSING"', {}, "the environment variable MISSING is not set"),
        ('token_file = "nope"', {}, "cannot read token_file"),
        ('token_env = "BAD"', {"BAD": "not a token"}, "does not look like a bot token"),
        ('token_env = "TG"\nmode = "webhook"', {}, 'mode = "webhook" needs webhook_url'),
        (
            'token_env = "TG"\nmode = "webhook"\nwebhook_url = "https://b.example/x"',
            {},
            "needs webhook_secret_env",
        ),
        (
            'token_env = "TG"\nmode = "webhook"\nwebhook_url = "https://b.example/x"\n'
            'webhook_secret_env = "HOOK"',
            {"HOOK": "has spaces"},
            "must be 1-256 characters",
        ),
        ('token_env = "TG"\nmode = "push"', {}, "platforms.telegram.mode"),
        ('token_env = "TG"\ntoken = "x"', {}, "platforms.telegram.token: Extra inputs"),
        ('token_env = "TG"\nburst = 0', {}, "platforms.telegram.burst"),
    ],
)
def test_bad_platform_settings_say_what_to_fix_and_never_show_the_token(
    tmp_path: Path, section: str, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=r"platforms\.telegram") as caught:
        _load(tmp_path, section, env)
    assert fragment in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_serve_help_shows_the_platforms_section() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for phrase in (
        "[platforms.telegram] starts a Telegram bot",
        "pip install 'stoker[telegram]'",
        'mode = "polling" (the default) or "webhook"',
        "token_env or token_file",
        "allowed_users, allowed_chats: who is answered (default: nobody)",
        "[platforms.discord] starts a Discord bot",
        "pip install 'stoker[discord]'",
        "allowed_servers (Discord): server ids",
        '[memory] directory = "memory" gives each user their own memory',
    ):
        assert phrase in text


DISCORD_TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GsecrT.discord-secret-token-value-0123456789abc"


def _discord(tmp_path: Path, section: str, env: dict[str, str] | None = None) -> PlatformSettings:
    path = tmp_path / "gateway.toml"
    path.write_text(f"[platforms.discord]\n{section}\n", encoding="utf-8")
    return load_config(path, env={"DC": DISCORD_TOKEN, **(env or {})}).platforms


def test_a_discord_section_allows_users_channels_and_whole_servers(tmp_path: Path) -> None:
    platforms = _discord(
        tmp_path,
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


@pytest.mark.parametrize(
    ("section", "env", "fragment"),
    [
        ("", {}, "give exactly one of token_env"),
        ('token_env = "BAD"', {"BAD": "Bot " + DISCORD_TOKEN}, "without a 'Bot ' prefix"),
        ('token_env = "BAD"', {"BAD": "short"}, "does not look like a bot token"),
        ('token_env = "DC"\nallowed_users = ["@alice"]', {}, "'@alice', not a Discord id"),
        ('token_env = "DC"\nallowed_servers = ["*"]', {}, '"*" is for allowed_users'),
        ('token_env = "DC"\nmode = "socket"', {}, "platforms.discord.mode: Extra inputs"),
    ],
)
def test_bad_discord_settings_say_what_to_fix_and_never_show_the_token(
    tmp_path: Path, section: str, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=r"platforms\.discord") as caught:
        _discord(tmp_path, section, env)
    assert fragment in str(caught.value)
    assert DISCORD_TOKEN not in str(caught.value)
