"""The Slack tests' rig: the fake Slack on loopback, a bridge on a sim gateway whose
routes are called the way Slack calls them (signed, retried with the same event), and
the user's side of a chat (`SlackChat`, a `platform_checks.Chat`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from stoker.gateway.service import Gateway
from stoker.platforms.bridge import RETRY_EVERY, Bridge
from stoker.platforms.questions import NOT_YOURS
from stoker.platforms.slack.adapter import SlackAdapter
from stoker.platforms.slack.settings import SlackSettings
from tests import fake_platform
from tests.fake_slack import FakeSlack
from tests.platform_checks import FakeChat, app_client, bridge_on, rig_settings, running

TOKEN = "xoxb-1111111111-2222222222-fakeBotTokenForTests0123"
SIGNING_SECRET = "5ec4e7f1a2b3c4d5e6f708192a3b4c5d"
APP_TOKEN = "xapp-1-A0APP001-1234-fakeAppLevelToken0123456789"
USER = "U0USER01"
OTHER = "U0OTHER1"
DM = "D0DM0001"
EVENTS = "/platforms/slack/events"
ACTIONS = "/platforms/slack/actions"
COMMANDS = "/platforms/slack/commands"
Api = fake_platform.Api[FakeSlack]


def serving() -> AbstractContextManager[Api]:
    return fake_platform.serve(FakeSlack(token=TOKEN, signing_secret=SIGNING_SECRET))


@pytest.fixture
def api() -> Iterator[Api]:
    with serving() as served:
        yield served


def bridge(gateway: Gateway, url: str, **kwargs: Any) -> Bridge:
    given = rig_settings(USER, kwargs)
    s = SlackSettings(token=TOKEN, signing_secret=SIGNING_SECRET, api_url=f"{url}/api", **given)
    return bridge_on(gateway, SlackAdapter(s), s, retry_every=RETRY_EVERY)


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
    async with app_client(gateway, b) as client, running(b):
        yield Slack(fake=api.fake, client=client)


class SlackChat(FakeChat):
    """The test user's direct messages with the app, on the fake Slack, delivered to the
    gateway's signed routes."""

    platform = "slack"
    user, other = USER, OTHER
    stored = f"{DM}//{USER}"
    silences = False  # Slack has no silent messages: a bot's notify as the channel says

    def __init__(self, api: Api) -> None:
        super().__init__(api, bridge)
        self.api = api
        self._slack: Slack | None = None

    @asynccontextmanager
    async def talking(self, gateway: Gateway, b: Bridge) -> AsyncIterator[Bridge]:
        async with slack_to(gateway, b, self.api) as self._slack:
            yield b

    @property
    def slack(self) -> Slack:
        assert self._slack is not None, "only while talking"
        return self._slack

    async def say(self, text: str) -> str:
        event = self.fake.event(text)
        assert await self.slack.deliver(event) == 200
        return str(event["event_id"])

    def texts(self) -> list[str]:
        return self.fake.texts()

    def quiet(self) -> list[bool]:
        return [False for _ in self.fake.sent()]

    def edits(self) -> list[str]:
        return [e["text"] for e in self.fake.sent("chat.update")]

    def notes(self) -> list[str]:
        return [e["text"] for e in self.fake.sent("chat.postEphemeral")]

    def asked(self) -> list[dict[str, Any]]:
        return list(self.fake.asked)

    def buttons(self, question: dict[str, Any]) -> list[str]:
        return [e["text"]["text"] for e in question["blocks"][-1]["elements"]]

    async def press(self, question: dict[str, Any], button: int, *, other: bool = False) -> None:
        assert await self.slack.press(question, button, user=OTHER if other else USER) == 200

    def check_questions(self) -> None:
        for question in self.asked():  # each button carries the question's token and its index
            values = [e["value"] for e in question["blocks"][-1]["elements"]]
            assert all(v.endswith(f":{i}") for i, v in enumerate(values))
        # a note is seen only by who pressed; an answered question loses its buttons
        for note in self.fake.sent("chat.postEphemeral"):
            assert note["user"] == (OTHER if note["text"] == NOT_YOURS else USER)
        assert all(e["blocks"] == [] for e in self.fake.sent("chat.update"))
