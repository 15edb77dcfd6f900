"""Telegram through the gateway's HTTP side: the webhook route (secret header checked,
a retried delivery answered once), and `stoker serve`'s config starting a bot whose
token never reaches a log line or the database."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.gateway.service import Gateway
from stoker.platforms.bridge import Bridge
from stoker.platforms.telegram.adapter import SECRET_HEADER
from stoker.store.base import SqlEventStore
from tests.platform_checks import (
    HOSTILE_BODIES,
    JSON,
    app_client,
    assert_secrets_kept,
    assert_start_refused,
    routes_of,
    served,
)
from tests.telegram_rig import TOKEN, USER, Api, api, bridge
from tests.test_gateway_support import make_rig

__all__ = ["api"]
SECRET = "hook-secret_0123456789"
HOOK = "https://bot.example/platforms/telegram"


def _hooked(gateway: Gateway, api: Api) -> Bridge:
    return bridge(gateway, api.url, mode="webhook", webhook_url=HOOK, webhook_secret=SECRET)


async def test_a_webhook_update_needs_the_secret_and_a_retry_is_answered_once(
    store: SqlEventStore, api: Api
) -> None:
    rig = make_rig(store)
    b = _hooked(rig.gateway, api)
    await b.start()
    try:
        assert api.fake.sent("setWebhook") == [
            {
                "url": HOOK,
                "secret_token": SECRET,
                "allowed_updates": ["message", "callback_query"],
            }
        ]
        update = api.fake.user_message("hello hook")
        api.fake.updates.clear()  # delivered by the webhook, not by getUpdates
        async with app_client(rig.gateway, b) as c:
            path = "/platforms/telegram"
            refused = [
                (await c.post(path, json=update)).status_code,
                (await c.post(path, json=update, headers={SECRET_HEADER: "wrong"})).status_code,
            ]
            assert refused == [403, 403]
            assert await store.pending_updates("telegram") == []
            ok = {SECRET_HEADER: SECRET}
            assert (await c.post(path, content=b"{nope", headers=ok)).status_code == 400
            assert (await c.post(path, json=update, headers=ok)).status_code == 200
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
            assert (await c.post(path, json=update, headers=ok)).status_code == 200  # a retry
        await b.idle()
    finally:
        await b.stop()
    assert api.fake.texts() == ["Understood: hello hook"]
    assert [name for name, _ in api.fake.calls if name == "getUpdates"] == []


async def test_serve_config_starts_the_bot_and_the_token_is_never_logged_or_stored(
    tmp_path: Path, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"BOT_TOKEN": TOKEN}
    with served(
        tmp_path,
        caplog,
        "telegram",
        env,
        token_env="BOT_TOKEN",
        api_url=api.url,
        allowed_users=[USER],
        poll_timeout_seconds=1,
    ) as gateway:
        api.fake.user_message("hello from the served gateway")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert api.fake.texts() == ["Understood: hello from the served gateway"]
    assert "HTTP Request: POST" in caplog.text  # the client logged its calls...
    assert "<redacted>" in caplog.text  # ...with the token masked
    assert_secrets_kept(gateway, tmp_path, caplog, TOKEN, TOKEN.split(":")[1])


UPDATES = st.fixed_dictionaries(
    {"update_id": st.integers(1, 2**40)},
    optional={
        "message": st.fixed_dictionaries(
            {},
            optional={
                "message_id": JSON,
                "date": JSON,
                "chat": JSON,
                "from": JSON,
                "text": JSON,
                "photo": JSON,
            },
        ),
        "callback_query": JSON,
    },
)


@HOSTILE_BODIES
@given(body=UPDATES | JSON)
async def test_any_webhook_body_is_answered_without_a_server_error(
    tmp_path: Path, api: Api, body: object
) -> None:
    async with routes_of(tmp_path, lambda gateway: _hooked(gateway, api)) as (c, store):
        r = await c.post("/platforms/telegram", json=body, headers={SECRET_HEADER: SECRET})
        assert r.status_code in (200, 400)
        assert await store.pending_updates("telegram") == []  # nothing from user 42 here


async def test_a_rejected_token_fails_the_start_without_showing_it(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "987654321:AAF-not_the_bot_token_987654321abcdef"
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, token=wrong)
    await assert_start_refused(b, "Telegram rejected the bot token", wrong.split(":")[1], caplog)
    assert [name for name, _ in api.fake.calls] == []  # the fake refused it: no method ran
