"""What every chat platform does the same, tested once against each: the real platform
library against its fake API on loopback, the real bridge, gateway service and store
(both backends), the simulator as the model. Each platform's own behaviour (its wire,
its ways of receiving, its restarts) is in its own `test_platform_*` files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from stoker.agent.review import ReviewConfig
from stoker.platforms.access import Allowlist
from stoker.platforms.base import ChatKey
from stoker.platforms.questions import NOT_OPEN, NOT_YOURS
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.tools import ToolRegistry, Toolset
from stoker.toolsets.workspace import workspace_toolset
from stoker.wire.record import CacheRecord
from tests import discord_rig, slack_rig, telegram_rig
from tests.helpers import make_registry
from tests.platform_checks import (
    Chat,
    assert_review_reads_the_turn,
    assert_secrets_kept,
    assert_start_refused,
    assert_tenth_reads_the_ninth,
    chat_rig,
    exchange,
    served,
)
from tests.test_gateway_support import make_rig
from tests.test_review import ReviewingModel, memory

PLATFORMS: dict[str, tuple[Callable[[], AbstractContextManager[Any]], Callable[[Any], Chat]]] = {
    "telegram": (telegram_rig.serving, telegram_rig.TelegramChat),
    "slack": (slack_rig.serving, slack_rig.SlackChat),
    "discord": (discord_rig.serving, discord_rig.DiscordChat),
}


@pytest.fixture(params=list(PLATFORMS))
def chat(request: pytest.FixtureRequest) -> Iterator[Chat]:
    serving, driver = PLATFORMS[request.param]
    with serving() as api:
        yield driver(api)


async def test_a_chats_tenth_message_reads_the_whole_prefix_of_its_ninth(
    store: SqlEventStore, chat: Chat
) -> None:
    rig = chat_rig(store)
    async with chat.talking(rig.gateway, chat.bridge(rig.gateway)):
        for i in range(1, 11):
            assert await exchange(chat, f"message {i}") == [f"Understood: message {i}"]
    await assert_tenth_reads_the_ninth(rig.gateway, chat.platform, chat.stored, chat.user)


async def test_tool_progress_edits_one_status_message_and_a_review_follows_quietly(
    store: SqlEventStore, chat: Chat, recorded_calls: list[CacheRecord]
) -> None:
    registry = make_registry()
    registry.register(Toolset(name="memory_tools", tools=[memory]))
    rig = make_rig(store, registry=registry, review=ReviewConfig(memory_every=1))
    rig.provider = SimProvider(engine=SimEngine(model=ReviewingModel()), clock=rig.clock)
    async with chat.talking(rig.gateway, chat.bridge(rig.gateway)):
        await exchange(chat, "read_file 'a.md'", replies=3)
    assert chat.texts() == [
        "⚙ read_file",
        "Done. Tool results: read_file ok: a.md",
        "Memory updated",
    ]
    assert chat.edits() == ["✓ read_file"]
    # the status and the review's line do not notify, where the platform can say so
    assert chat.quiet() == ([True, False, True] if chat.silences else [False] * 3)
    # the review is a fork of the platform turn: it reads everything the turn cached
    assert_review_reads_the_turn(recorded_calls)


async def test_a_review_that_ends_before_the_reply_is_delivered_still_follows_it(
    store: SqlEventStore, chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review runs beside the reply's delivery; here the reply is held back until the
    review's line has been sent (or a second has passed, when that line waits for the
    reply as it should): the user still reads the answer first."""
    registry = make_registry()
    registry.register(Toolset(name="memory_tools", tools=[memory]))
    rig = make_rig(store, registry=registry, review=ReviewConfig(memory_every=1))
    rig.provider = SimProvider(engine=SimEngine(model=ReviewingModel()), clock=rig.clock)
    b = chat.bridge(rig.gateway)
    send, quiet_sent = b.adapter.send, asyncio.Event()

    async def held_send(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("quiet") and "Memory" in args[2]:
            quiet_sent.set()
        elif args[2].startswith("Done."):  # the turn's reply
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(quiet_sent.wait(), 1.0)
        return await send(*args, **kwargs)

    monkeypatch.setattr(b.adapter, "send", held_send)
    async with chat.talking(rig.gateway, b):
        await exchange(chat, "read_file 'a.md'", replies=3)
    assert chat.texts()[1:] == ["Done. Tool results: read_file ok: a.md", "Memory updated"]


async def test_a_button_question_approves_and_another_denies(
    store: SqlEventStore, chat: Chat
) -> None:
    rig = chat_rig(store)
    b = chat.bridge(rig.gateway, allowlist=Allowlist(users=frozenset({chat.user, chat.other})))
    key = ChatKey(platform=chat.platform, chat=chat.stored.split("/")[0], user=chat.user)
    async with chat.talking(rig.gateway, b):
        answers = []
        for button in (0, 1):
            ask = asyncio.create_task(b.ask(key, "Run shell 'ls'?", ["Allow", "Deny"]))
            await chat.wait_for(lambda n=button: len(chat.asked()) == n + 1)
            question = chat.asked()[-1]
            await chat.press(question, button, other=True)  # not theirs to answer
            await chat.wait_for(lambda n=button: len(chat.notes()) == 2 * n + 1)
            await chat.press(question, button)
            answers.append(await ask)
        await chat.press(question, 0)  # a question already answered
        await chat.wait_for(lambda: len(chat.notes()) == 5)
    assert answers == ["Allow", "Deny"]
    assert [chat.buttons(q) for q in chat.asked()] == [["Allow", "Deny"]] * 2
    assert chat.notes() == [NOT_YOURS, "Allow", NOT_YOURS, "Deny", NOT_OPEN]
    # the question is edited to its answer
    assert chat.edits() == ["Run shell 'ls'?\n→ Allow", "Run shell 'ls'?\n→ Deny"]
    chat.check_questions()
    assert await store.list_sessions() == []  # a question is not a turn


async def test_a_risky_call_asks_with_buttons_and_runs_only_when_allowed(
    store: SqlEventStore, chat: Chat, tmp_path: Path
) -> None:
    """The workspace's `add_note` is risky: each call posts Allow / Deny in the chat, and
    the turn goes on with what the chat's user pressed, stored with who decided."""
    rig = make_rig(store, registry=ToolRegistry([workspace_toolset(tmp_path)]), keep_warm=False)
    async with chat.talking(rig.gateway, chat.bridge(rig.gateway)):
        for n, (text, button) in enumerate(
            [("add_note 'ship on friday'", 0), ("add_note 'and on monday'", 1)]
        ):
            await chat.say(text)
            await chat.wait_for(lambda n=n: len(chat.asked()) == n + 1)
            await chat.press(chat.asked()[-1], button)
            await chat.wait_for(
                lambda n=n: sum(t.startswith("Done.") for t in chat.texts()) == n + 1
            )
    questions = [t for t in chat.texts() if t.startswith("Allow ")]
    assert questions == [
        'Allow add_note(text="ship on friday")?',
        'Allow add_note(text="and on monday")?',
    ]
    assert [chat.buttons(q) for q in chat.asked()] == [["Allow", "Deny"]] * 2
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"  # denied: never ran
    sid = await store.chat_session(chat.platform, chat.stored)
    assert sid is not None
    events = await store.events(sid)
    decided = [json.loads(body) for _, kind, _, body in events if kind == "approval_decided"]
    by = f"user:{chat.platform}:{chat.user}"
    assert [(d["approved"], d["by"]) for d in decided] == [(True, by), (False, by)]
    answers = [t for t in chat.texts() if t.startswith("Done.")]
    assert "the user denied add_note" in answers[-1]


async def test_an_answer_not_delivered_is_delivered_after_a_restart_without_a_new_turn(
    store: SqlEventStore, chat: Chat
) -> None:
    rig = chat_rig(store)
    chat.fail_sends(1)  # the platform is down when the answer goes out
    async with chat.talking(rig.gateway, chat.bridge(rig.gateway)):
        update = await chat.say("hello")
        await chat.wait_for(lambda: len(chat.texts()) == 1)
    (pending,) = await store.pending_updates(chat.platform)
    assert pending.key == update  # it stayed pending until delivered
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    calls = len(sim.requests)
    gateway = rig.another_process(store)
    async with chat.talking(gateway, chat.bridge(gateway)):
        await chat.wait_for(lambda: len(chat.texts()) == 2)
    assert chat.texts() == ["Understood: hello", "Understood: hello"]  # failed, then sent
    assert len(sim.requests) == calls  # replayed from the idempotency store, not run again
    assert await store.pending_updates(chat.platform) == []


@pytest.mark.parametrize(
    ("platform", "config", "logged", "secrets"),
    [
        # python-telegram-bot's client logs its calls, with the token masked
        (
            "telegram",
            telegram_rig.serve_config,
            ["HTTP Request: POST", "<redacted>"],
            [telegram_rig.TOKEN, telegram_rig.TOKEN.split(":")[1]],
        ),
        # discord.py logs its requests and the gateway's payloads
        ("discord", discord_rig.serve_config, ["GET"], [discord_rig.TOKEN]),
    ],
    ids=["telegram", "discord"],
)
async def test_serve_config_starts_the_bot_and_the_token_is_never_logged_or_stored(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    platform: str,
    config: Callable[[str], tuple[dict[str, str], dict[str, Any]]],
    logged: list[str],
    secrets: list[str],
) -> None:
    """A bot that reaches its platform itself (Slack's calls the gateway: its own test in
    `test_platform_slack_http`)."""
    serving, _ = PLATFORMS[platform]
    with serving() as api:
        env, section = config(api.url)
        with served(tmp_path, caplog, platform, env, **section) as gateway:
            await api.fake.wait_for(lambda: api.fake.connected)
            api.fake.user_message("hello from the served gateway")
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
        assert api.fake.texts() == ["Understood: hello from the served gateway"]
    assert [line for line in logged if line not in caplog.text] == []
    assert_secrets_kept(gateway, tmp_path, caplog, *secrets)


@pytest.mark.parametrize(
    ("platform", "wrong", "match", "secret", "reached"),
    [
        # the fake refused it: no method ran
        (
            "telegram",
            "987654321:AAF-not_the_bot_token_987654321abcdef",
            "Telegram rejected the bot token",
            lambda token: token.split(":")[1],
            lambda fake: [name for name, _ in fake.calls],
        ),
        # it never reached the gateway connection
        (
            "discord",
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Gwrong.not-the-bot-token-but-one-of-the-right-shape",
            "Discord refused the bot token",
            lambda token: token,
            lambda fake: fake.identified,
        ),
    ],
    ids=["telegram", "discord"],
)
async def test_a_rejected_token_fails_the_start_without_showing_it(
    store: SqlEventStore,
    caplog: pytest.LogCaptureFixture,
    platform: str,
    wrong: str,
    match: str,
    secret: Callable[[str], str],
    reached: Callable[[Any], list[Any]],
) -> None:
    """`secret`: the part of a token that is secret; `reached`: what of the fake's API the
    bridge reached (nothing)."""
    caplog.set_level(logging.DEBUG)
    serving, driver = PLATFORMS[platform]
    with serving() as api:
        b = driver(api).bridge(make_rig(store).gateway, token=wrong)
        await assert_start_refused(b, match, secret(wrong), caplog)
        assert reached(api.fake) == []
