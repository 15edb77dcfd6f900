"""From the configured platforms to bridges on one gateway: `stoker serve`'s companions.

Each adapter's library is an optional extra, imported only when its platform is
configured; a missing one is a clear error at start, saying which extra to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from stoker.errors import ConfigError
from stoker.gateway.service import Gateway
from stoker.platforms.access import ChatRates
from stoker.platforms.base import Adapter
from stoker.platforms.bridge import Bridge
from stoker.platforms.config import PlatformSettings

# Each platform: its adapter (module, class) and the library its extra installs.
ADAPTERS: dict[str, tuple[str, str, str]] = {
    "telegram": ("stoker.platforms.telegram.adapter", "TelegramAdapter", "python-telegram-bot"),
    "slack": ("stoker.platforms.slack.adapter", "SlackAdapter", "slack-sdk and aiohttp"),
    "discord": ("stoker.platforms.discord.adapter", "DiscordAdapter", "discord.py"),
}


def build_bridges(settings: PlatformSettings, gateway: Gateway) -> list[Bridge]:
    """A bridge on `gateway` for each configured platform (to start and stop with the
    gateway's app: `gateway.serve(..., companions=...)`)."""
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
