"""The Telegram tests' rig: the fake Bot API on loopback, and bridges on a sim gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from stoker.gateway.platforms.access import Allowlist, ChatRates, RateLimit
from stoker.gateway.platforms.bridge import Bridge
from stoker.gateway.platforms.settings import TelegramSettings
from stoker.gateway.platforms.telegram import TelegramAdapter
from stoker.gateway.server import serve_in_thread
from stoker.gateway.service import Gateway
from stoker.providers.sim.model import RuleModel
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request
from tests.fake_telegram import FakeTelegram

TOKEN = "123456789:AAE-fake_token_for_tests_only_0123456"
USER = 42


@dataclass(frozen=True, slots=True, kw_only=True)
class Api:
    fake: FakeTelegram
    url: str


@pytest.fixture
def api() -> Iterator[Api]:
    fake = FakeTelegram(token=TOKEN)
    with serve_in_thread(fake.app()) as url:
        yield Api(fake=fake, url=url)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def settings(url: str, **kwargs: object) -> TelegramSettings:
    kwargs.setdefault("allowlist", Allowlist(users=frozenset({str(USER)})))
    kwargs.setdefault("rate", RateLimit(per_minute=600, burst=100))
    kwargs.setdefault("token", TOKEN)
    return TelegramSettings(api_url=url, poll_timeout=1, **kwargs)  # type: ignore[arg-type]


def bridge(
    gateway: Gateway,
    url: str,
    *,
    now: Clock | None = None,
    retry_every: float = 60.0,
    **kwargs: object,
) -> Bridge:
    s = settings(url, **kwargs)
    rates = ChatRates(s.rate, now=now) if now is not None else ChatRates(s.rate)
    return Bridge(
        gateway,
        TelegramAdapter(s, retry_pause=0.05),
        allowlist=s.allowlist,
        rates=rates,
        typing_every=0.05,
        retry_every=retry_every,
    )


@asynccontextmanager
async def running(b: Bridge) -> AsyncIterator[Bridge]:
    """`b` receiving; on the way out everything it started is finished, then it stops."""
    await b.start()
    try:
        yield b
        await b.idle()
    finally:
        await b.stop()


LONG = "\n\n".join(
    f"Paragraph {i}: " + "words that fill a phone screen & more <tags> " * 12 for i in range(40)
)


class ChatModel:
    """The rule model, except "long ..." gets a reply longer than a Telegram message."""

    def __init__(self, inner: object | None = None) -> None:
        self.inner = inner or RuleModel()

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("long"):
            return (TextBlock(text=LONG),)
        return self.inner.respond(request)  # type: ignore[attr-defined,no-any-return]
