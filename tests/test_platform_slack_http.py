"""Slack from `stoker serve`'s config: a served gateway answering a signed event over real
HTTP on loopback, and the secrets (bot token, signing secret, Slack's legacy
verification token) never in a log line or the database. Any body on the events route
gets an answer, never a server error. (The section's checks: `test_platform_config`.)"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.platforms.access import Allowlist
from stoker.platforms.base import ButtonPress, Message
from stoker.platforms.slack.adapter import SlackAdapter
from stoker.platforms.slack.settings import SlackSettings
from tests.fake_slack import BOT_USER
from tests.platform_checks import (
    HOSTILE_BODIES,
    JSON,
    assert_secrets_kept,
    files_holding,
    routes_of,
    served,
)
from tests.slack_rig import ACTIONS, EVENTS, SIGNING_SECRET, TOKEN, USER, Api, api, bridge

__all__ = ["api"]


async def test_serve_config_answers_a_signed_event_and_no_secret_is_logged_or_stored(
    tmp_path: Path, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    event = api.fake.event("hello from the served gateway")
    body = json.dumps(event).encode()
    with served(
        tmp_path,
        caplog,
        "slack",
        env,
        token_env="SLACK_BOT_TOKEN",
        signing_secret_env="SLACK_SIGNING_SECRET",
        api_url=f"{api.url}/api",
        allowed_users=[USER],
    ) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url) as client:
            r = await client.post(EVENTS, content=body, headers=api.fake.headers(body))
            assert r.status_code == 200
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
            bad = await client.post(
                EVENTS, content=body, headers=api.fake.headers(body, secret="guess")
            )
            assert bad.status_code == 401
    assert api.fake.texts() == ["Understood: hello from the served gateway"]
    assert "Sending a request - url: POST" in caplog.text  # the SDK logged its calls...
    assert_secrets_kept(gateway, tmp_path, caplog, TOKEN, TOKEN.split("-")[-1], SIGNING_SECRET)
    assert files_holding(tmp_path, "gateway.db", "legacy-verification-token") == []
    assert files_holding(tmp_path, "gateway.db", event["event_id"]) != []  # it was stored


EVENT = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "app_mention"]) | JSON,
        "user": JSON,
        "text": JSON,
        "ts": JSON,
        "channel": JSON,
        "channel_type": st.just("im") | JSON,
        "thread_ts": JSON,
        "subtype": JSON,
        "bot_id": JSON,
        "files": JSON,
    },
)
ENVELOPES = st.fixed_dictionaries(
    {"type": st.just("event_callback")},
    optional={"event_id": st.text(max_size=12) | JSON, "event": EVENT, "authorizations": JSON},
)


@HOSTILE_BODIES
@given(body=ENVELOPES | JSON)
async def test_any_signed_events_body_is_answered_without_a_server_error(
    tmp_path: Path, api: Api, body: object
) -> None:
    raw = json.dumps(body).encode()
    everyone = Allowlist(users=frozenset({"*"}))
    async with routes_of(tmp_path, lambda g: bridge(g, api.url, allowlist=everyone)) as (c, _):
        r = await c.post(EVENTS, content=raw, headers=api.fake.headers(raw))
        assert r.status_code in (200, 400)
        actions = b"payload=" + raw
        r = await c.post(ACTIONS, content=actions, headers=api.fake.headers(actions))
        assert r.status_code in (200, 400)


PRESSES = st.fixed_dictionaries(
    {"type": st.just("block_actions")},
    optional={
        "user": st.fixed_dictionaries({}, optional={"id": JSON}) | JSON,
        "channel": st.fixed_dictionaries({}, optional={"id": JSON}) | JSON,
        "message": JSON,
        "trigger_id": JSON,
        "actions": st.lists(st.fixed_dictionaries({}, optional={"value": JSON}), max_size=2) | JSON,
    },
)
COMMANDS = st.fixed_dictionaries(
    {"type": st.just("slash_command")},
    optional={k: st.text(max_size=12) for k in ("command", "text", "user_id", "channel_id")},
)
MENTIONED = st.text(alphabet="ab <>@&|U0", max_size=30).map(lambda t: f"<@{BOT_USER}> {t}")


@given(
    raw=ENVELOPES | PRESSES | COMMANDS | st.dictionaries(st.text(max_size=10), JSON),
    text=MENTIONED,
)
def test_parse_reads_any_payload_without_raising(raw: dict[str, object], text: str) -> None:
    adapter = SlackAdapter(SlackSettings(token=TOKEN, signing_secret=SIGNING_SECRET))
    update = adapter.parse(raw)
    assert update is None or isinstance(update, Message | ButtonPress)
    mention = {
        "type": "event_callback",
        "event_id": "Ev1",
        "authorizations": [{"user_id": BOT_USER, "is_bot": True}],
        "event": {"type": "message", "user": USER, "channel": "C1", "text": text, "ts": "1.2"},
    }
    message = adapter.parse(mention)
    assert message is None or (message.id, message.key.chat) == ("Ev1", "C1")
    assert message is None or f"<@{BOT_USER}>" not in message.text
