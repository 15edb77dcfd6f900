"""The Slack tests' rig: the fake Slack on loopback, and a bridge on a sim gateway whose
routes are called the way Slack calls them (signed, retried with the same event)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from stoker.gateway.app import create_app
from stoker.gateway.platforms.access import Allowlist, ChatRates, RateLimit
from stoker.gateway.platforms.bridge import Bridge
from stoker.gateway.platforms.settings import SlackSettings
from stoker.gateway.platforms.slack import SlackAdapter
from stoker.gateway.server import serve_in_thread
from stoker.gateway.service import Gateway
from tests.fake_slack import FakeSlack
from tests.test_gateway_support import tokens

TOKEN = "xoxb-1111111111-2222222222-fakeBotTokenForTests0123"
SIGNING_SECRET = "5ec4e7f1a2b3c4d5e6f708192a3b4c5d"
USER = "U0USER01"
DM = "D0DM0001"
EVENTS = "/platforms/slack/events"
ACTIONS = "/platforms/slack/actions"
COMMANDS = "/platforms/slack/commands"


@dataclass(frozen=True, slots=True, kw_only=True)
class Api:
    fake: FakeSlack
    url: str


@pytest.fixture
def api() -> Iterator[Api]:
    fake = FakeSlack(token=TOKEN, signing_secret=SIGNING_SECRET)
    with serve_in_thread(fake.app()) as url:
        fake.base_url = url
        yield Api(fake=fake, url=url)


def settings(url: str, **kwargs: Any) -> SlackSettings:
    kwargs.setdefault("allowlist", Allowlist(users=frozenset({USER})))
    kwargs.setdefault("rate", RateLimit(per_minute=600, burst=100))
    return SlackSettings(token=TOKEN, signing_secret=SIGNING_SECRET, api_url=f"{url}/api", **kwargs)


def bridge(gateway: Gateway, url: str, **kwargs: Any) -> Bridge:
    s = settings(url, **kwargs)
    return Bridge(
        gateway,
        SlackAdapter(s),
        allowlist=s.allowlist,
        rates=ChatRates(s.rate),
        typing_every=0.05,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Slack:
    """Slack calling the gateway's routes."""

    fake: FakeSlack
    client: httpx.AsyncClient

    async def post(
        self, path: str, body: bytes, *, form: bool = False, **headers: str
    ) -> httpx.Response:
        kind = "application/x-www-form-urlencoded" if form else "application/json"
        signed = self.fake.headers(body)
        return await self.client.post(
            path, content=body, headers={"Content-Type": kind, **signed, **headers}
        )

    async def deliver(self, envelope: dict[str, Any], *, retry: int = 0) -> int:
        """Slack delivering an event (`retry`: its how-many-th retry); the status."""
        extra = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        body = json.dumps(envelope).encode()
        r = await self.post(EVENTS, body, **(extra if retry else {}))
        return r.status_code

    async def press(self, sent: dict[str, Any], button: int, *, user: str = USER) -> int:
        body = self.fake.press(sent, button, user=user).encode()
        return (await self.post(ACTIONS, body, form=True)).status_code

    async def command(self, command: str, text: str = "", **kwargs: str) -> int:
        body = self.fake.command(command, text, **kwargs).encode()
        return (await self.post(COMMANDS, body, form=True)).status_code


@asynccontextmanager
async def slack_to(gateway: Gateway, b: Bridge, api: Api) -> AsyncIterator[Slack]:
    """Slack delivering to the gateway's routes for `b` (started and stopped here; on
    the way out everything it started is finished first)."""
    app = create_app(gateway, tokens=tokens(), platforms=[b])
    await b.start()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            yield Slack(fake=api.fake, client=client)
        await b.idle()
    finally:
        await b.stop()
