"""The Discord tests' rig: the fake Discord (REST and gateway) on loopback, and bridges
on a sim gateway."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from stoker.gateway.platforms.access import Allowlist, ChatRates, RateLimit
from stoker.gateway.platforms.bridge import Bridge
from stoker.gateway.platforms.discord import DiscordAdapter
from stoker.gateway.platforms.settings import DiscordSettings
from stoker.gateway.server import serve_in_thread
from stoker.gateway.service import Gateway
from tests.fake_discord import USER, FakeDiscord

TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GfakeT.fake-token-for-tests-only-0123456789abcdef"


@dataclass(frozen=True, slots=True, kw_only=True)
class Api:
    fake: FakeDiscord
    url: str


@pytest.fixture
def api() -> Iterator[Api]:
    fake = FakeDiscord(token=TOKEN)
    with serve_in_thread(fake.app()) as url:
        fake.url = url
        yield Api(fake=fake, url=url)


def settings(url: str, **kwargs: Any) -> DiscordSettings:
    kwargs.setdefault("allowlist", Allowlist(users=frozenset({str(USER)})))
    kwargs.setdefault("rate", RateLimit(per_minute=600, burst=100))
    kwargs.setdefault("token", TOKEN)
    return DiscordSettings(api_url=f"{url}/api/v10", **kwargs)


def bridge(gateway: Gateway, url: str, *, retry_every: float = 60.0, **kwargs: Any) -> Bridge:
    s = settings(url, **kwargs)
    return Bridge(
        gateway,
        DiscordAdapter(s),
        allowlist=s.allowlist,
        rates=ChatRates(s.rate),
        typing_every=0.05,
        retry_every=retry_every,
    )
