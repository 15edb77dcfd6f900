"""From the configured platforms to running bridges on one gateway.

Each adapter's library is an optional extra, imported only when its platform is
configured; a missing one is a clear error at start, saying which extra to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from stoker.errors import ConfigError
from stoker.gateway.platforms.access import ChatRates
from stoker.gateway.platforms.base import Adapter
from stoker.gateway.platforms.bridge import Bridge
from stoker.gateway.platforms.settings import PlatformSettings
from stoker.gateway.service import Gateway

# Each platform: its adapter (module, class) and the library its extra installs.
ADAPTERS: dict[str, tuple[str, str, str]] = {
    "telegram": ("stoker.gateway.platforms.telegram", "TelegramAdapter", "python-telegram-bot"),
    "slack": ("stoker.gateway.platforms.slack", "SlackAdapter", "slack-sdk and aiohttp"),
    "discord": ("stoker.gateway.platforms.discord", "DiscordAdapter", "discord.py"),
}


def build_bridges(settings: PlatformSettings, gateway: Gateway) -> list[Bridge]:
    bridges = []
    for name in settings.names:
        module, adapter, library = ADAPTERS[name]
        try:
            make: Callable[[Any], Adapter] = getattr(importlib.import_module(module), adapter)
        except ImportError as exc:
            raise ConfigError(
                f"[platforms.{name}] needs {library}: pip install 'stoker[{name}]'"
            ) from exc
        platform = getattr(settings, name)
        bridges.append(
            Bridge(
                gateway,
                make(platform),
                allowlist=platform.allowlist,
                rates=ChatRates(platform.rate),
            )
        )
    return bridges
