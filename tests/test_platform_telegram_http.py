"""Telegram through the gateway's HTTP side: the webhook route (secret header checked,
a retried delivery answered once), and `stoker serve`'s config starting a bot whose
token never reaches a log line or the database."""

from __future__ import annotations

import logging
import traceback
import uuid
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigError
from stoker.gateway.app import create_app
from stoker.gateway.config import load_config
from stoker.gateway.platforms.telegram import SECRET_HEADER
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from tests.telegram_rig import TOKEN, USER, Api, api, bridge
from tests.test_gateway_support import make_rig, tokens

__all__ = ["api"]
SECRET = "hook-secret_0123456789"
HOOK = "https://bot.example/platforms/telegram"


async def test_a_webhook_update_needs_the_secret_and_a_retry_is_answered_once(
    store: SqlEventStore, api: Api
) -> None:
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, mode="webhook", webhook_url=HOOK, webhook_secret=SECRET)
    app = create_app(rig.gateway, tokens=tokens(), platforms=[b])
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
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
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
    caplog.set_level(logging.DEBUG)
    database = tmp_path / "gateway.db"
    config_file = tmp_path / "gateway.toml"
    config_file.write_text(
        f'database = "{database}"\n'
        "[platforms.telegram]\n"
        'token_env = "BOT_TOKEN"\n'
        f'api_url = "{api.url}"\n'
        f"allowed_users = [{USER}]\n"
        "poll_timeout_seconds = 1\n",
        encoding="utf-8",
    )
    config = load_config(config_file, env={"BOT_TOKEN": TOKEN})
    rig = make_rig(SQLiteStore(database))
    gateway = build_gateway(config, store=rig.gateway.store, provider_factory=rig.factory)
    with serve_in_thread(build_app(config, gateway)):
        api.fake.user_message("hello from the served gateway")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert api.fake.texts() == ["Understood: hello from the served gateway"]
    assert "HTTP Request: POST" in caplog.text  # the client logged its calls...
    assert "<redacted>" in caplog.text  # ...with the token masked
    assert TOKEN not in caplog.text
    assert TOKEN.split(":")[1] not in caplog.text
    assert _files_holding(tmp_path, "gateway.db", TOKEN.split(":")[1]) == []
    assert TOKEN not in repr(config)


def _files_holding(folder: Path, prefix: str, secret: str) -> list[str]:
    """The files named `prefix`* (the database, its WAL) whose bytes contain `secret`."""
    files = [p for p in folder.iterdir() if p.name.startswith(prefix)]
    assert files
    return [p.name for p in files if secret.encode() in p.read_bytes()]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)
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


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=UPDATES | JSON)
async def test_any_webhook_body_is_answered_without_a_server_error(
    tmp_path: Path, api: Api, body: object
) -> None:
    store = SQLiteStore(tmp_path / f"fuzz-{uuid.uuid4().hex}.db")
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, mode="webhook", webhook_url=HOOK, webhook_secret=SECRET)
    app = create_app(rig.gateway, tokens=tokens(), platforms=[b])
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
            r = await c.post("/platforms/telegram", json=body, headers={SECRET_HEADER: SECRET})
        assert r.status_code in (200, 400)
        assert await store.pending_updates("telegram") == []  # nothing from user 42 here
    finally:
        await b.idle()
        await store.close()


async def test_a_rejected_token_fails_the_start_without_showing_it(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "987654321:AAF-not_the_bot_token_987654321abcdef"
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, token=wrong)
    with pytest.raises(ConfigError, match="Telegram rejected the bot token") as caught:
        await b.start()
    shown = "".join(traceback.format_exception(caught.value)) + caplog.text
    assert wrong.split(":")[1] not in shown
    assert [name for name, _ in api.fake.calls] == []  # the fake refused it: no method ran
