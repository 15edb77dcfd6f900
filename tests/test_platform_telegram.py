"""Telegram end to end: python-telegram-bot against a fake Bot API on loopback, the real
gateway service and store (both backends), the simulator as the model."""

from __future__ import annotations

import pytest

from stoker.platforms.access import Allowlist, RateLimit
from stoker.platforms.base import ChatKey
from stoker.platforms.telegram.adapter import FORMATTING
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from tests import platform_checks as checks
from tests.platform_checks import LONG, chat_rig, exchange, running
from tests.telegram_rig import USER, Api, Clock, TelegramChat, api, bridge

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


async def _exchange(api: Api, text: str) -> list[str]:
    return await exchange(TelegramChat(api), text)


async def test_commands_work_and_new_moves_the_chat_to_a_new_session(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        first = await checks.assert_help_and_usage(TelegramChat(api), store)
        (unknown,) = await _exchange(api, "/nope")
        assert unknown.startswith("unknown command /nope; commands: /new, /reset")
        (started,) = await _exchange(api, "/new@stoker_test_bot")
        second = await store.chat_session("telegram", f"{USER}//{USER}")
        assert started == f"started session {second}"
        api.fake.user_message("/new@another_bot")  # addressed to another bot: not ours
        assert await _exchange(api, "after new") == ["Understood: after new"]
    user = f"telegram:{USER}"
    first, second = await checks.assert_a_new_session(rig.gateway, user, first, second)
    # the new session is on the same surface: its prefix has the same formatting rules
    old, new = await store.load(first), await store.load(second)
    assert FORMATTING in new.prefix.system
    assert new.prefix.system == old.prefix.system
    assert len(await store.list_sessions(owner=user)) == 2


async def test_a_restart_mid_turn_loses_nothing_and_answers_nothing_twice(
    store: SqlEventStore, api: Api
) -> None:
    """Telegram sends the cut-off update again, after the one sent while the gateway was
    down."""
    await checks.assert_a_restart_loses_nothing(
        TelegramChat(api), store, while_down=api.fake.redeliver
    )


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
    await checks.assert_nothing_stored(store, "telegram")


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
