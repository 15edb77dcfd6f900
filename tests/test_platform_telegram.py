"""Telegram end to end: python-telegram-bot against a fake Bot API on loopback, the real
gateway service and store (both backends), the simulator as the model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from stoker.agent.review import ReviewConfig
from stoker.gateway.platforms.access import Allowlist, RateLimit
from stoker.gateway.platforms.base import ChatKey
from stoker.gateway.platforms.telegram import FORMATTING
from stoker.providers.base import CallContext, Completion
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.tools import ToolRegistry, Toolset
from stoker.toolsets.workspace import workspace_toolset
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from tests.helpers import make_registry
from tests.platform_checks import (
    assert_review_reads_the_turn,
    assert_tenth_reads_the_ninth,
    chat_rig,
)
from tests.store_fixtures import reopen
from tests.telegram_rig import LONG, USER, Api, Clock, api, bridge, running
from tests.test_gateway_support import Wrapped, make_rig
from tests.test_review import ReviewingModel, memory

__all__ = ["api"]


async def test_a_message_runs_a_turn_and_the_reply_arrives(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("hello bot")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert api.fake.sent() == [
        {
            "chat_id": USER,
            "text": "Understood: hello bot",
            "parse_mode": "HTML",
            "disable_notification": False,
        }
    ]
    assert api.fake.sent("sendChatAction")[0] == {"chat_id": USER, "action": "typing"}
    sid = await store.chat_session("telegram", f"{USER}//{USER}")
    assert sid is not None
    view = await rig.gateway.view(f"telegram:{USER}", sid)
    assert [(t.user, t.answer) for t in view.turns] == [("hello bot", "Understood: hello bot")]
    stored = await store.load(sid)
    assert FORMATTING in stored.prefix.system
    assert await store.pending_updates("telegram") == []


async def test_a_long_reply_is_split_within_telegrams_limit(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("long answer please")
        await api.fake.wait_for(lambda: len(api.fake.sent()) >= 2)
    texts = api.fake.texts()
    sizes = [len(t.encode("utf-16-le")) // 2 for t in texts]
    assert len(texts) == 7  # 22k characters, 27k once escaped
    assert all(3500 < n <= 4096 for n in sizes[:-1])  # each message as full as fits
    assert all(t.startswith("Paragraph ") for t in texts)  # cut between paragraphs
    joined = "\n\n".join(t.strip("\n") for t in texts)
    assert joined == LONG.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def _exchange(api: Api, text: str, *, replies: int = 1) -> list[str]:
    """Send `text` as the user; the texts the bot sent for it."""
    before = len(api.fake.sent())
    api.fake.user_message(text)
    await api.fake.wait_for(lambda: len(api.fake.sent()) >= before + replies)
    return api.fake.texts()[before:]


async def test_commands_work_and_new_moves_the_chat_to_a_new_session(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        assert await _exchange(api, "hello") == ["Understood: hello"]
        first = await store.chat_session("telegram", f"{USER}//{USER}")
        (help_text,) = await _exchange(api, "/help")
        assert help_text.splitlines()[0] == "/new: start a new session with the default settings"
        (usage,) = await _exchange(api, "/usage")
        assert usage.startswith("1 requests, $")
        (unknown,) = await _exchange(api, "/nope")
        assert unknown.startswith("unknown command /nope; commands: /new, /reset")
        (started,) = await _exchange(api, "/new@stoker_test_bot")
        second = await store.chat_session("telegram", f"{USER}//{USER}")
        assert started == f"started session {second}"
        api.fake.user_message("/new@another_bot")  # addressed to another bot: not ours
        assert await _exchange(api, "after new") == ["Understood: after new"]
    assert first is not None
    assert second is not None
    assert second != first
    user = f"telegram:{USER}"
    assert [t.user for t in (await rig.gateway.view(user, first)).turns] == ["hello"]
    assert [t.user for t in (await rig.gateway.view(user, second)).turns] == ["after new"]
    # the new session is on the same surface: its prefix has the same formatting rules
    old, new = await store.load(first), await store.load(second)
    assert FORMATTING in new.prefix.system
    assert new.prefix.system == old.prefix.system
    assert len(await store.list_sessions(owner=user)) == 2


async def test_a_button_question_approves_and_another_denies(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    b = bridge(rig.gateway, api.url, allowlist=Allowlist(users=frozenset({str(USER), "43"})))
    key = ChatKey(platform="telegram", chat=str(USER), user=str(USER))
    await b.start()
    try:
        answers = []
        for button in (0, 1):
            ask = asyncio.create_task(b.ask(key, "Run shell 'ls'?", ["Allow", "Deny"]))
            await api.fake.wait_for(lambda n=button: len(api.fake.posted) == n + 1)
            question = api.fake.posted[-1]
            api.fake.press(question, button, user=43)  # another user: not theirs to answer
            await api.fake.wait_for(
                lambda n=button: len(api.fake.sent("answerCallbackQuery")) == 2 * n + 1
            )
            api.fake.press(question, button)
            answers.append(await ask)
        api.fake.press(question, 0)  # a question already answered
        await api.fake.wait_for(lambda: len(api.fake.sent("answerCallbackQuery")) == 5)
    finally:
        await b.stop()
    assert answers == ["Allow", "Deny"]
    keyboard = question["reply_markup"]["inline_keyboard"]
    assert [[button["text"] for button in row] for row in keyboard] == [["Allow", "Deny"]]
    assert [a["text"] for a in api.fake.sent("answerCallbackQuery")] == [
        "This question is not yours to answer.",
        "Allow",
        "This question is not yours to answer.",
        "Deny",
        "This question is no longer open.",
    ]
    assert [e["text"] for e in api.fake.sent("editMessageText")] == [
        "Run shell 'ls'?\n→ Allow",
        "Run shell 'ls'?\n→ Deny",
    ]
    assert await store.list_sessions() == []  # a question is not a turn


class _Stuck(Wrapped):
    """Hangs on the turn that says "stuck", as a process does just before it dies."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()

    async def complete(self, request: Request, context: CallContext) -> Completion:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("stuck"):
            self.entered.set()
            await asyncio.Event().wait()
        return await self.inner.complete(request, context)


async def test_a_restart_mid_turn_loses_nothing_and_answers_nothing_twice(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    stuck = _Stuck(sim)
    rig.provider = stuck  # type: ignore[assignment]
    first = bridge(rig.gateway, api.url)
    await first.start()
    assert await _exchange(api, "one") == ["Understood: one"]
    update = api.fake.user_message("stuck two")
    await stuck.entered.wait()
    await first.stop(grace=0)  # the process dies mid-turn (its writes are shielded)
    # ...without letting go of its lease on the update, as a killed process does
    lease = f"platform:telegram:{update['update_id']}"
    assert await store.take_lease(lease, "the-dead-process", seconds=1.0)
    api.fake.user_message("three, sent while the gateway was down")
    api.fake.redeliver(update)  # and Telegram sends the cut-off update again
    rig.provider = sim
    reopened = reopen(store)
    try:
        second = bridge(rig.another_process(reopened), api.url, retry_every=0.2)
        await second.start()
        try:
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
            assert await _exchange(api, "four") == ["Understood: four"]
            await second.idle()
        finally:
            await second.stop()
        assert api.fake.texts() == [
            "Understood: one",
            "Understood: stuck two",
            "Understood: three, sent while the gateway was down",
            "Understood: four",
        ]
        sid = await reopened.chat_session("telegram", f"{USER}//{USER}")
        assert sid is not None
        stored = await reopened.load(sid)
        asked = [m.text for m in stored.messages if isinstance(m, UserMessage) and m.text]
        assert asked == ["one", "stuck two", "three, sent while the gateway was down", "four"]
        assert await reopened.pending_updates("telegram") == []
    finally:
        await reopened.close()


async def test_an_answer_not_delivered_is_delivered_after_a_restart_without_a_new_turn(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    first = bridge(rig.gateway, api.url)
    await first.start()
    api.fake.fail_next["sendMessage"] = 1  # Telegram is down when the answer goes out
    api.fake.user_message("hello")
    await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    await first.idle()
    await first.stop()
    (pending,) = await store.pending_updates("telegram")
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    calls = len(sim.requests)
    second = bridge(rig.another_process(store), api.url)
    await second.start()
    try:
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
        await second.idle()
    finally:
        await second.stop()
    assert api.fake.texts() == ["Understood: hello", "Understood: hello"]  # failed, then sent
    assert len(sim.requests) == calls  # replayed from the idempotency store, not run again
    assert await store.pending_updates("telegram") == []
    assert pending.key == "1000"  # the update's id: it stayed pending until delivered


async def test_nobody_outside_the_allowlist_gets_anything(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    b = bridge(rig.gateway, api.url, allowlist=Allowlist())  # the default: nobody
    await b.start()
    try:
        update = api.fake.user_message("hello?", user=99)
        api.fake.photo("look", user=99)
        await api.fake.wait_for(lambda: (update["update_id"] + 2) in api.fake.offsets)
        await b.idle()
    finally:
        await b.stop()
    assert [name for name, _ in api.fake.calls if name != "getUpdates"] == [
        "getMe",
        "deleteWebhook",
    ]
    assert await store.list_sessions() == []
    assert await store.pending_updates("telegram") == []


async def test_a_chat_over_its_rate_limit_is_told_once_and_recovers(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    clock = Clock()
    async with running(
        bridge(rig.gateway, api.url, now=clock, rate=RateLimit(per_minute=1, burst=2))
    ):
        for i in range(4):
            api.fake.user_message(f"m{i}")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
        clock.now = 60.0
        assert await _exchange(api, "later") == ["Understood: later"]
    texts = api.fake.texts()
    assert sorted(texts[:3]) == sorted(
        [
            "Understood: m0",
            "Understood: m1",
            "Too many messages: this one was not read. Try again in 60 s.",
        ]
    )
    assert texts[3:] == ["Understood: later"]


async def test_tool_progress_edits_one_status_message_and_a_review_follows_quietly(
    store: SqlEventStore, api: Api, recorded_calls: list[CacheRecord]
) -> None:
    registry = make_registry()
    registry.register(Toolset(name="memory_tools", tools=[memory]))
    rig = make_rig(store, registry=registry, review=ReviewConfig(memory_every=1))
    rig.provider = SimProvider(engine=SimEngine(model=ReviewingModel()), clock=rig.clock)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("read_file 'a.md'")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
    status, answer, review = api.fake.sent()
    assert status == {
        "chat_id": USER,
        "text": "⚙ read_file",
        "disable_notification": True,
    }
    assert [e["text"] for e in api.fake.sent("editMessageText")] == ["✓ read_file"]
    assert answer["text"] == "Done. Tool results: read_file ok: a.md"
    assert review == {"chat_id": USER, "text": "Memory updated", "disable_notification": True}
    # the review is a fork of the platform turn: it reads everything the turn cached
    assert_review_reads_the_turn(recorded_calls)


async def test_a_chats_tenth_message_reads_the_whole_prefix_of_its_ninth(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        for i in range(1, 11):
            assert await _exchange(api, f"message {i}") == [f"Understood: message {i}"]
    await assert_tenth_reads_the_ninth(rig.gateway, "telegram", f"{USER}//{USER}", str(USER))


async def test_each_user_in_each_group_topic_has_their_own_session(
    store: SqlEventStore, api: Api
) -> None:
    group = -100123
    rig = chat_rig(store)
    allow = Allowlist(chats=frozenset({str(group)}))
    async with running(bridge(rig.gateway, api.url, allowlist=allow)):
        api.fake.user_message("in the group", user=42, chat=group)
        api.fake.user_message("in topic 7", user=43, chat=group, thread=7)
        api.fake.user_message("me too in topic 7", user=42, chat=group, thread=7)
        api.fake.user_message("elsewhere", user=42, chat=-100999)  # a chat not allowed
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
    replies = sorted((p["text"], p["chat_id"], p.get("message_thread_id")) for p in api.fake.sent())
    assert replies == [
        ("Understood: in the group", group, None),
        ("Understood: in topic 7", group, 7),
        ("Understood: me too in topic 7", group, 7),
    ]
    keys = [f"{group}//42", f"{group}/7/43", f"{group}/7/42"]
    sessions = [await store.chat_session("telegram", k) for k in keys]
    assert len(set(sessions)) == 3
    owners = [await store.owner(s) for s in sessions if s is not None]
    assert owners == ["telegram:42", "telegram:43", "telegram:42"]
    assert len(await store.list_sessions()) == 3


async def test_a_question_nobody_answers_gives_none_and_says_so(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    key = ChatKey(platform="telegram", chat=str(USER), user=str(USER))
    async with running(bridge(rig.gateway, api.url)) as b:
        assert await b.ask(key, "Delete the branch?", ["Allow", "Deny"], wait=0.3) is None
    assert [e["text"] for e in api.fake.sent("editMessageText")] == [
        "Delete the branch?\n(no answer in time)"
    ]


async def test_an_answer_the_platform_refused_is_sent_again_without_a_restart(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    api.fake.fail_next["sendMessage"] = 2  # Telegram fails the answer twice
    async with running(bridge(rig.gateway, api.url, retry_every=0.1)):
        api.fake.user_message("hello")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
        calls = len(sim.requests)
        assert await _exchange(api, "next") == ["Understood: next"]
    assert api.fake.texts() == ["Understood: hello"] * 3 + ["Understood: next"]
    assert calls == 1  # one turn: the tries replayed its stored answer
    assert await store.pending_updates("telegram") == []


async def test_flood_control_delays_a_long_reply_without_losing_or_repeating_a_part(
    store: SqlEventStore, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PTB 22 warns when it reads a retry_after as an int; the timedelta form is its future
    monkeypatch.setenv("PTB_TIMEDELTA", "1")
    rig = chat_rig(store)
    api.fake.flood = {3}  # the third message is answered "429: retry after 1"
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("long answer please")
        await api.fake.wait_for(lambda: len(api.fake.texts()) == 8, within=15)
    texts = api.fake.texts()
    assert texts[2] == texts[3]  # the refused part, then the same part once it was let in
    parts = texts[:2] + texts[3:]
    assert len(parts) == 7
    assert "\n\n".join(t.strip("\n") for t in parts) == (
        LONG.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    )


async def test_a_retry_after_a_failure_part_way_sends_only_the_parts_that_did_not_arrive(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    api.fake.broken = {3}  # Telegram fails the third message of the reply
    async with running(bridge(rig.gateway, api.url, retry_every=0.1)):
        api.fake.user_message("long answer please")
        await api.fake.wait_for(lambda: len(api.fake.texts()) == 8)
    texts = api.fake.texts()
    assert texts[2] == texts[3]  # the failed part, sent again by the retry
    assert "\n\n".join(t.strip("\n") for t in texts[:2] + texts[3:]) == (
        LONG.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    )
    assert await store.pending_updates("telegram") == []
    assert await store.delivered("telegram", "1000") == 7


async def test_a_risky_call_asks_with_buttons_and_runs_only_when_allowed(
    store: SqlEventStore, api: Api, tmp_path: Path
) -> None:
    """The workspace's `add_note` is risky: each call posts Allow / Deny to the chat, and
    the turn goes on with what the chat's user pressed, stored with who decided."""
    rig = make_rig(store, registry=ToolRegistry([workspace_toolset(tmp_path)]), keep_warm=False)
    notes = tmp_path / "NOTES.md"
    async with running(bridge(rig.gateway, api.url)):
        for n, (text, button) in enumerate(
            [("add_note 'ship on friday'", 0), ("add_note 'and on monday'", 1)]
        ):
            api.fake.user_message(text)
            await api.fake.wait_for(
                lambda n=n: sum(bool(p["reply_markup"]) for p in api.fake.posted) == n + 1
            )
            question = [p for p in api.fake.posted if p["reply_markup"]][-1]
            api.fake.press(question, button)
            await api.fake.wait_for(lambda n=n: len(api.fake.sent()) == 3 * (n + 1))
    questions = [p for p in api.fake.posted if p["reply_markup"]]
    assert [q["text"] for q in questions] == [
        'Allow add_note(text="ship on friday")?',
        'Allow add_note(text="and on monday")?',
    ]
    assert [[b["text"] for b in q["reply_markup"]["inline_keyboard"][0]] for q in questions] == [
        ["Allow", "Deny"],
        ["Allow", "Deny"],
    ]
    assert notes.read_text() == "- ship on friday\n"  # the denied note was never written
    sid = await store.chat_session("telegram", f"{USER}//{USER}")
    assert sid is not None
    decided = [
        json.loads(body)
        for _, kind, _, body in await store.events(sid)
        if kind == "approval_decided"
    ]
    assert [(d["approved"], d["by"]) for d in decided] == [
        (True, f"user:telegram:{USER}"),
        (False, f"user:telegram:{USER}"),
    ]
    replies = [t for t in api.fake.texts() if t.startswith("Done.")]
    assert "the user denied add_note" in replies[-1]
