"""Slack from `stoker serve`'s config: `[platforms.slack]` checked at load with errors
that say what to fix, a served gateway answering a signed event over real HTTP on
loopback, and the secrets (bot token, signing secret, Slack's legacy verification token)
never in a log line, an error or the database. Any body on the events route gets an
answer, never a server error."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from stoker.cli import app
from stoker.errors import ConfigError
from stoker.gateway.app import create_app
from stoker.gateway.config import load_config
from stoker.gateway.platforms.access import Allowlist, RateLimit
from stoker.gateway.platforms.base import ButtonPress, Message
from stoker.gateway.platforms.settings import PlatformSettings, SlackSettings
from stoker.gateway.platforms.slack import SlackAdapter
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.store.sqlite import SQLiteStore
from tests.fake_slack import BOT_USER
from tests.slack_rig import EVENTS, SIGNING_SECRET, TOKEN, USER, Api, api, bridge
from tests.test_gateway_support import make_rig, tokens
from tests.test_platform_telegram_http import _files_holding

__all__ = ["api"]
APP_TOKEN = "xapp-1-A0APP001-1234-fakeAppLevelToken0123456789"


def _load(tmp_path: Path, section: str, env: dict[str, str] | None = None) -> PlatformSettings:
    path = tmp_path / "gateway.toml"
    path.write_text(f"[platforms.slack]\n{section}\n", encoding="utf-8")
    base = {"BOT": TOKEN, "SIGNING": SIGNING_SECRET, "APP": APP_TOKEN}
    return load_config(path, env={**base, **(env or {})}).platforms


def test_a_slack_section_resolves_with_its_secrets_from_the_environment_or_a_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "signing").write_text(SIGNING_SECRET + "\n", encoding="utf-8")
    platforms = _load(
        tmp_path,
        'token_env = "BOT"\nsigning_secret_file = "signing"\nallowed_users = ["U1", "U2"]\n'
        'allowed_chats = ["C1"]\nrate_per_minute = 6\nburst = 2',
    )
    assert platforms == PlatformSettings(
        slack=SlackSettings(
            token=TOKEN,
            signing_secret=SIGNING_SECRET,
            allowlist=Allowlist(users=frozenset({"U1", "U2"}), chats=frozenset({"C1"})),
            rate=RateLimit(per_minute=6, burst=2),
        )
    )
    assert platforms.names == ("slack",)
    assert TOKEN not in repr(platforms)
    assert SIGNING_SECRET not in repr(platforms)
    socket = _load(tmp_path, 'mode = "socket"\ntoken_env = "BOT"\napp_token_env = "APP"').slack
    assert socket is not None
    assert (socket.mode, socket.app_token, socket.signing_secret) == ("socket", APP_TOKEN, None)
    assert APP_TOKEN not in repr(socket)
    assert _load(tmp_path, 'token_env = "BOT"\nsigning_secret_env = "SIGNING"').slack == (
        SlackSettings(token=TOKEN, signing_secret=SIGNING_SECRET)  # nobody allowed by default
    )


@pytest.mark.parametrize(
    ("section", "env", "fragment"),
    [
        ('signing_secret_env = "SIGNING"', {}, "give exactly one of token_env"),
        ('token_env = "BOT"', {}, "give exactly one of signing_secret_env"),
        (
            'token_env = "BOT"\nsigning_secret_env = "SIGNING"\nsigning_secret_file = "x"',
            {},
            "give exactly one of signing_secret_env",
        ),
        ('token_env = "BOT"\nsigning_secret_file = "nope"', {}, "cannot read signing_secret_file"),
        ('token_env = "BOT"\nsigning_secret_env = "UNSET"', {}, "UNSET is not set"),
        ('token_env = "USER"\nsigning_secret_env = "SIGNING"', {"USER": "xoxp-1"}, "(xoxb-...)"),
        ('mode = "socket"\ntoken_env = "BOT"', {}, "give exactly one of app_token_env"),
        ('mode = "socket"\ntoken_env = "BOT"\napp_token_env = "BOT"', {}, "(xapp-...)"),
        ('mode = "rtm"\ntoken_env = "BOT"', {}, "platforms.slack.mode"),
        ('token_env = "BOT"\nsigning_secret_env = "SIGNING"\npath = "x"', {}, "start with /"),
    ],
)
def test_bad_slack_settings_say_what_to_fix_and_never_show_a_secret(
    tmp_path: Path, section: str, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=r"platforms\.slack") as caught:
        _load(tmp_path, section, env)
    assert fragment in str(caught.value)
    for secret in (TOKEN, SIGNING_SECRET, APP_TOKEN):
        assert secret not in str(caught.value)


def test_serve_help_shows_the_slack_section() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for phrase in (
        "[platforms.slack] starts a Slack app; pip install 'stoker[slack]'",
        'mode = "events" (the default; Slack posts to /platforms/slack/events) or "socket"',
        "signing_secret_env or signing_secret_file",
        "app_token_env or app_token_file",
    ):
        assert phrase in text


async def test_serve_config_answers_a_signed_event_and_no_secret_is_logged_or_stored(
    tmp_path: Path, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    database = tmp_path / "gateway.db"
    config_file = tmp_path / "gateway.toml"
    config_file.write_text(
        f'database = "{database}"\n'
        "[platforms.slack]\n"
        'token_env = "SLACK_BOT_TOKEN"\n'
        'signing_secret_env = "SLACK_SIGNING_SECRET"\n'
        f'api_url = "{api.url}/api"\n'
        f'allowed_users = ["{USER}"]\n',
        encoding="utf-8",
    )
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    config = load_config(config_file, env=env)
    rig = make_rig(SQLiteStore(database))
    gateway = build_gateway(config, store=rig.gateway.store, provider_factory=rig.factory)
    event = api.fake.event("hello from the served gateway")
    body = json.dumps(event).encode()
    with serve_in_thread(build_app(config, gateway)) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.post(EVENTS, content=body, headers=api.fake.headers(body))
            assert r.status_code == 200
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
            bad = await client.post(
                EVENTS, content=body, headers=api.fake.headers(body, secret="guess")
            )
            assert bad.status_code == 401
    assert api.fake.texts() == ["Understood: hello from the served gateway"]
    assert "Sending a request - url: POST" in caplog.text  # the SDK logged its calls...
    for secret in (TOKEN, TOKEN.split("-")[-1], SIGNING_SECRET):  # ...and no secret
        assert secret not in caplog.text
        assert _files_holding(tmp_path, "gateway.db", secret) == []
    assert _files_holding(tmp_path, "gateway.db", "legacy-verification-token") == []
    assert _files_holding(tmp_path, "gateway.db", event["event_id"]) != []  # it was stored
    assert TOKEN not in repr(config)
    assert SIGNING_SECRET not in repr(config)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)
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


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=ENVELOPES | JSON)
async def test_any_signed_events_body_is_answered_without_a_server_error(
    tmp_path: Path, api: Api, body: object
) -> None:
    store = SQLiteStore(tmp_path / f"fuzz-{uuid.uuid4().hex}.db")
    rig = make_rig(store)
    b = bridge(rig.gateway, api.url, allowlist=Allowlist(users=frozenset({"*"})))
    app = create_app(rig.gateway, tokens=tokens(), platforms=[b])
    transport = httpx.ASGITransport(app=app)
    raw = json.dumps(body).encode()
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
            r = await c.post(EVENTS, content=raw, headers=api.fake.headers(raw))
            assert r.status_code in (200, 400)
            actions = b"payload=" + raw
            r = await c.post(
                "/platforms/slack/actions", content=actions, headers=api.fake.headers(actions)
            )
            assert r.status_code in (200, 400)
    finally:
        await b.idle()
        await store.close()


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
