"""Telegram through the gateway's HTTP side: the webhook route (secret header checked,
a retried delivery answered once, any body answered without a server error). (`stoker
serve`'s config starting a bot whose token is never logged, and a token Telegram
rejects: `test_platforms`.)"""

from __future__ import annotations

from pathlib import Path

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
    routes_of,
)
from tests.telegram_rig import Api, api, bridge
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
