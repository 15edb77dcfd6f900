"""From the configured platforms to running bridges on one gateway.

Each adapter's library is an optional extra, imported only when its platform is
configured; a missing one is a clear error at start, saying which extra to install.
"""

from __future__ import annotations

from stoker.errors import ConfigError
from stoker.gateway.platforms.access import ChatRates
from stoker.gateway.platforms.bridge import Bridge
from stoker.gateway.platforms.settings import PlatformSettings
from stoker.gateway.service import Gateway


def build_bridges(settings: PlatformSettings, gateway: Gateway) -> list[Bridge]:
    bridges = []
    if settings.telegram is not None:
        try:
            from stoker.gateway.platforms.telegram import TelegramAdapter
        except ImportError as exc:
            raise ConfigError(
                "[platforms.telegram] needs python-telegram-bot: pip install 'stoker[telegram]'"
            ) from exc
        t = settings.telegram
        bridges.append(
            Bridge(
                gateway,
                TelegramAdapter(t),
                allowlist=t.allowlist,
                rates=ChatRates(t.rate),
            )
        )
    if settings.slack is not None:
        try:
            from stoker.gateway.platforms.slack import SlackAdapter
        except ImportError as exc:
            raise ConfigError(
                "[platforms.slack] needs slack-sdk and aiohttp: pip install 'stoker[slack]'"
            ) from exc
        s = settings.slack
        bridges.append(
            Bridge(gateway, SlackAdapter(s), allowlist=s.allowlist, rates=ChatRates(s.rate))
        )
    if settings.discord is not None:
        try:
            from stoker.gateway.platforms.discord import DiscordAdapter
        except ImportError as exc:
            raise ConfigError(
                "[platforms.discord] needs discord.py: pip install 'stoker[discord]'"
            ) from exc
        d = settings.discord
        bridges.append(
            Bridge(gateway, DiscordAdapter(d), allowlist=d.allowlist, rates=ChatRates(d.rate))
        )
    return bridges
