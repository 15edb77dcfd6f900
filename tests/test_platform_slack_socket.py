"""Slack in Socket Mode: slack-sdk's Socket Mode client (aiohttp) against the fake's
`apps.connections.open` and websocket on loopback, the real gateway and store.

Each envelope is acknowledged only after the inbox accepted it; one cut off by a restart
is sent again by Slack and answered once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from stoker.gateway.service import Gateway
from stoker.platforms.access import Allowlist
from stoker.platforms.base import ChatKey
from stoker.platforms.bridge import Bridge
from stoker.store.base import SqlEventStore
from tests.fake_slack import BOT_USER
from tests.platform_checks import ASKED, Crash, chat_rig, running
from tests.slack_rig import APP_TOKEN, DM, TOKEN, USER, Api, api, bridge

__all__ = ["api"]


def _socket(gateway: Gateway, api: Api, **kwargs: object) -> Bridge:
    api.fake.app_token = APP_TOKEN
    return bridge(gateway, api.url, mode="socket", app_token=APP_TOKEN, **kwargs)


async def test_socket_mode_answers_a_message_a_command_and_a_button(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rig = chat_rig(store)
    fake = api.fake
    b = _socket(rig.gateway, api)
    async with running(b):
        assert b.routes() == ()  # nothing for Slack to post to in Socket Mode
        hello = fake.envelope("events_api", fake.event("hello socket"))
        await fake.wait_for(lambda: len(fake.sent()) == 1)
        usage = fake.envelope("slash_commands", fake.command_fields("/stoker", "usage"))
        await fake.wait_for(lambda: len(fake.sent()) == 2)
        key = ChatKey(platform="slack", chat=DM, user=USER)
        ask = asyncio.create_task(b.ask(key, "Run shell 'ls'?", ["Allow", "Deny"]))
        await fake.wait_for(lambda: len(fake.posted) == 3)
        press = fake.envelope("interactive", fake.press_payload(fake.posted[-1], 1))
        assert await ask == "Deny"
        await fake.wait_for(lambda: len(fake.acks) == 3)
    assert fake.texts()[0] == "Understood: hello socket"
    assert fake.texts()[1].startswith("1 requests, $")
    assert [e["text"] for e in fake.sent("chat.update")] == ["Run shell 'ls'?\n→ Deny"]
    assert fake.acks == [hello["envelope_id"], usage["envelope_id"], press["envelope_id"]]
    assert fake.unacked == {}
    assert [name for name, _ in fake.calls][:2] == ["auth.test", "apps.connections.open"]
    assert await store.pending_updates("slack") == []
    assert 'Sending a message: {"envelope_id"' in caplog.text  # the SDK logged its acks
    assert APP_TOKEN not in caplog.text  # ...and its calls, without the tokens
    assert TOKEN not in caplog.text


async def test_socket_mode_restart_loses_nothing_and_answers_a_redelivery_once(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    fake = api.fake
    crash = Crash(rig)
    first = _socket(rig.gateway, api)
    await first.start()
    fake.envelope("events_api", fake.event("one"))
    await fake.wait_for(lambda: len(fake.sent()) == 1)
    cut = fake.event("stuck two")
    fake.envelope("events_api", cut)
    await fake.wait_for(lambda: len(fake.acks) == 2)  # accepted, so acknowledged
    await crash.kill(first)  # the process dies mid-turn
    fake.envelope("events_api", fake.event("three, sent while the gateway was down"))
    fake.envelope("events_api", cut)  # Slack delivering the cut-off event again
    async with crash.restart(store) as gateway:
        async with running(_socket(gateway, api)):
            await fake.wait_for(lambda: len(fake.sent()) == 3 and not fake.unacked)
        assert fake.texts() == [f"Understood: {text}" for text in ASKED[:3]]
        assert len(fake.acks) == 4
        assert fake.connections == 2
        assert await gateway.store.pending_updates("slack") == []


async def test_socket_mode_answers_nobody_outside_the_allowlist(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    fake = api.fake
    async with running(_socket(rig.gateway, api, allowlist=Allowlist())):
        fake.envelope("events_api", fake.event("hello?", user="U0STRANGE"))
        mention = fake.event(f"<@{BOT_USER}> hi", channel="C0CHAN01", channel_type="channel")
        fake.envelope("events_api", mention)
        await fake.wait_for(lambda: len(fake.acks) == 2)  # acknowledged, and dropped
    assert [name for name, _ in fake.calls] == ["auth.test", "apps.connections.open"]
    assert await store.list_sessions() == []
