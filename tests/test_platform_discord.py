"""Discord end to end: discord.py against a fake Discord on loopback (its REST API and
its gateway websocket), the real gateway service and store (both backends), the
simulator as the model."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from stoker.agent.review import ReviewConfig
from stoker.platforms.access import Allowlist
from stoker.platforms.discord.adapter import FORMATTING
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.wire.blocks import MAX_IMAGE_BYTES, ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from tests import platform_checks as checks
from tests.discord_rig import NO_EMBEDS, TOKEN, Api, DiscordChat, api, bridge, seen
from tests.fake_discord import CHANNEL, DM, GUILD, USER
from tests.images import png
from tests.platform_checks import LONG, chat_rig, running
from tests.test_gateway_support import make_rig
from tests.test_review import ReviewingModel

__all__ = ["api"]


async def _exchange(api: Api, text: str, *, replies: int = 1, **kwargs: Any) -> list[str]:
    """Send `text` as the user; the texts the bot sent for it, as the user sees them."""
    before = len(api.fake.sent())
    api.fake.user_message(text, **kwargs)
    await api.fake.wait_for(lambda: len(api.fake.sent()) >= before + replies)
    return [seen(str(m["content"])) for m in api.fake.sent()[before:]]


def _contents(api: Api) -> list[str]:
    return DiscordChat(api).texts()


async def test_a_message_runs_a_turn_and_the_reply_arrives(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("hello bot")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    (sent,) = api.fake.sent()
    assert sent["content"] == "Understood: hello bot"
    assert sent["channel_id"] == DM
    assert sent["allowed_mentions"] == {"parse": []}  # model output pings nobody
    assert sent["flags"] == NO_EMBEDS
    assert api.fake.sent("typing")[0] == {"channel_id": DM}
    (identify,) = api.fake.identified
    assert identify["intents"] == 1 | (1 << 9) | (1 << 12)  # servers, their messages, DMs
    sid = await store.chat_session("discord", f"{DM}//{USER}")
    assert sid is not None
    view = await rig.gateway.view(f"discord:{USER}", sid)
    assert [(t.user, t.answer) for t in view.turns] == [("hello bot", "Understood: hello bot")]
    assert FORMATTING in (await store.load(sid)).prefix.system
    assert await store.pending_updates("discord") == []


async def test_in_a_server_channel_only_a_mention_is_answered(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    server = Allowlist(chats=frozenset({str(GUILD)}))  # the whole server, any member
    async with running(bridge(rig.gateway, api.url, allowlist=server)):
        api.fake.user_message("talking among ourselves", channel=CHANNEL, user=77)
        api.fake.user_message("a DM from a member, not allowed", user=77)
        reply = await _exchange(api, "what is up?", channel=CHANNEL, user=77, mention=True)
    assert reply == ["Understood: what is up?"]  # the mention is taken out of the text
    assert [m["channel_id"] for m in api.fake.sent()] == [CHANNEL]
    sid = await store.chat_session("discord", f"{CHANNEL}//77")
    assert sid is not None
    assert await store.owner(sid) == "discord:77"
    assert len(await store.list_sessions()) == 1


async def test_a_long_reply_is_split_within_discords_limit(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("long answer please")
        await api.fake.wait_for(lambda: len(api.fake.sent()) >= 1)
    texts = _contents(api)  # all of it: `running` waits for the update to be done
    assert len(texts) == 14  # 22k characters, three paragraphs a message
    assert all(1500 < len(t) <= 2000 for t in texts[:-1])  # each message as full as fits
    assert all(t.startswith("Paragraph ") for t in texts)  # cut between paragraphs
    assert "\n\n".join(t.strip("\n") for t in texts) == LONG  # Discord reads it as written


async def test_commands_work_in_a_dm_and_with_a_mention(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    server = Allowlist(users=frozenset({str(USER)}))
    async with running(bridge(rig.gateway, api.url, allowlist=server)):
        first = await checks.assert_help_and_usage(DiscordChat(api), store)
        (started,) = await _exchange(api, "/new")
        second = await store.chat_session("discord", f"{DM}//{USER}")
        assert started == f"started session {second}"
        (in_channel,) = await _exchange(api, "/usage", channel=CHANNEL, mention=True)
        assert in_channel.startswith("0 requests")  # the channel is a chat of its own
    assert first is not None
    assert second is not None
    assert second != first
    old, new = await store.load(first), await store.load(second)
    assert new.prefix.system == old.prefix.system  # the same surface, the same formatting


async def test_a_restart_mid_turn_loses_nothing_and_answers_nothing_twice(
    store: SqlEventStore, api: Api
) -> None:
    """Discord does not deliver again: a message sent while the gateway was down is read
    back from the channel's history at the next connection."""

    def while_down(cut: dict[str, Any]) -> None:
        assert not api.fake.connected

    cut = await checks.assert_a_restart_loses_nothing(
        DiscordChat(api), store, while_down=while_down
    )
    # the catch-up asked for what came after the newest message it had accepted
    (caught,) = [c for c in api.fake.sent("get_messages") if c["channel_id"] == DM]
    assert caught["after"] == int(cut["id"])


async def test_a_dropped_connection_resumes_and_gets_what_it_missed(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        assert await _exchange(api, "before") == ["Understood: before"]
        api.fake.drop_connection()
        await api.fake.wait_for(lambda: not api.fake.connected)
        api.fake.user_message("while it was away")  # kept for the session's resume
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
        assert await _exchange(api, "after") == ["Understood: after"]
    assert (len(api.fake.identified), api.fake.resumed) == (1, 1)
    assert _contents(api) == [
        "Understood: before",
        "Understood: while it was away",
        "Understood: after",
    ]


async def test_nobody_outside_the_allowlist_gets_anything(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url, allowlist=Allowlist())) as b:
        api.fake.user_message("hello?", user=99)
        api.fake.user_message("hello?", user=99, channel=CHANNEL, mention=True)
        photo = api.fake.file("p.png", "image/png", png(8, 8))
        api.fake.user_message("a photo", user=99, files=[photo])
        await asyncio.sleep(0.3)
        question = api.fake.user_message("pretend question")  # not the bot's: no buttons
        assert question["components"] == []
        await b.idle()
    called = {name for name, _ in api.fake.calls}
    assert called <= {"get_me", "get_application", "set_commands", "get_gateway_bot"}
    await checks.assert_nothing_stored(store, "discord")
    assert await store.latest_updates("discord") == []  # nothing stored, not even the id


async def test_an_image_and_a_text_file_reach_the_model_after_the_text(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    chart, rows = png(64, 48), "day,sales\nmon,3\ntue,5\n"
    async with running(bridge(rig.gateway, api.url)):
        files = [
            api.fake.file("chart.png", "image/png", chart),
            api.fake.file("sales.csv", "text/csv; charset=utf-8", rows.encode()),
        ]
        api.fake.user_message("compare these", files=files)
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    sid = await store.chat_session("discord", f"{DM}//{USER}")
    assert sid is not None
    (asked,) = [m.content for m in (await store.load(sid)).messages if isinstance(m, UserMessage)]
    assert asked == (
        TextBlock(text="compare these"),
        ImageBlock(media_type="image/png", data=base64.b64encode(chart).decode()),
        TextBlock(text=f'<file name="sales.csv">\n{rows}\n</file>'),
    )
    assert _contents(api)[0].startswith("Understood: compare these")
    # from the CDN, which needs no token: the bot sends it none
    assert api.fake.sent("download") == [
        {"file": "file1", "token": False},
        {"file": "file2", "token": False},
    ]


async def test_attachments_the_model_cannot_take_get_a_clear_reply_and_the_text_its_answer(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        files = [
            api.fake.file("voice-message.ogg", "audio/ogg", b"OggS" + bytes(300)),
            api.fake.file("huge.png", "image/png", png(8, 8), stated=900, endless=True),
            api.fake.file("elsewhere.png", "image/png", png(8, 8), url="https://evil.example/x"),
        ]
        api.fake.user_message("what are these?", files=files)
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    refused, answer = _contents(api)
    assert refused.splitlines() == [
        "Not passed to the model:",
        "- voice-message.ogg (audio/ogg): voice and audio are not passed; please type what it says",
        "- huge.png: over the 3.9 MB limit",
        "- elsewhere.png: its download link is not Discord's",
    ]
    assert answer == "Understood: what are these?"
    assert api.fake.files.served["file2"] > MAX_IMAGE_BYTES  # it never ended: the bot stopped
    assert [d["file"] for d in api.fake.sent("download")] == ["file2"]  # nothing else fetched


async def test_slash_commands_are_registered_and_answered_in_place(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        assert await _exchange(api, "hello") == ["Understood: hello"]
        first = await store.chat_session("discord", f"{DM}//{USER}")
        for n, (name, values) in enumerate([("usage", ()), ("model", ("claude-fable-5-1",))]):
            api.fake.slash(name, *values)
            await api.fake.wait_for(lambda n=n: len(api.fake.sent("followup")) == n + 1)
        api.fake.slash("new")
        await api.fake.wait_for(lambda: len(api.fake.sent("followup")) == 3)
        api.fake.slash("usage", user=99)  # not allowed: no answer, not even "thinking"
        assert await _exchange(api, "after") == ["Understood: after"]
    registered = {c["name"]: c for c in api.fake.commands}
    assert list(registered) == [
        "new",
        "reset",
        "clear",
        "model",
        "reasoning",
        "compress",
        "usage",
        "help",
    ]
    assert registered["model"]["options"][0]["required"] is True
    deferred = api.fake.sent("interaction_callback")
    assert [c["type"] for c in deferred] == [5, 5, 5]  # "thinking...", then the answer
    usage, model, new = (seen(f["content"]) for f in api.fake.sent("followup"))
    assert usage.startswith("1 requests, $")
    assert "claude-fable-5-1" in model
    second = await store.chat_session("discord", f"{DM}//{USER}")
    assert new == f"started session {second}"
    assert second != first
    assert await store.pending_updates("discord") == []


async def test_a_refused_command_registration_leaves_typed_commands_working(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every request and gateway payload discord.py logs
    rig = chat_rig(store)
    api.fake.fail_next["set_commands"] = 1
    async with running(bridge(rig.gateway, api.url)):
        (usage,) = await _exchange(api, "/usage")
    assert usage.startswith("0 requests")
    assert api.fake.commands == []
    assert "slash commands not registered" in caplog.text
    assert TOKEN not in caplog.text


async def test_a_command_that_could_not_be_deferred_is_answered_in_the_channel(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    api.fake.expired = True  # the bot was too slow: Discord no longer takes an answer
    async with running(bridge(rig.gateway, api.url)):
        api.fake.slash("usage")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert _contents(api)[0].startswith("0 requests")
    assert api.fake.sent("followup") == []
    assert await store.pending_updates("discord") == []


async def test_the_users_memory_is_saved_by_a_review_and_read_by_their_next_session(
    store: SqlEventStore, api: Api, tmp_path: Path
) -> None:
    rig = make_rig(store, memory_dir=tmp_path / "memory", review=ReviewConfig(memory_every=1))
    rig.provider = SimProvider(engine=SimEngine(model=ReviewingModel()), clock=rig.clock)
    async with running(bridge(rig.gateway, api.url)):
        await _exchange(api, "hello", replies=2)  # the answer, then "Memory updated"
        first = await store.chat_session("discord", f"{DM}//{USER}")
        await _exchange(api, "/new")
        second = await store.chat_session("discord", f"{DM}//{USER}")
    assert _contents(api)[1] == "User profile updated"  # the review saved to USER.md
    assert first is not None
    assert second is not None
    old, new = await store.load(first), await store.load(second)
    assert "likes tea" not in old.prefix.system
    assert "likes tea" in new.prefix.system  # what the review saved, frozen in /new's prefix
    assert FORMATTING in new.prefix.system


async def test_a_stored_update_that_cannot_be_read_is_dropped_and_the_others_answered(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A pending row is outside input too (edited by hand, written by an older version):
    one that no longer parses must not keep the bridge from starting."""
    rig = chat_rig(store)
    good = {"type": "message", "id": "1", "channel_id": str(DM), "author_id": str(USER)}
    rows = [("0", "{not json"), ("1", json.dumps({**good, "text": "still here"}))]
    rows.append(("2", json.dumps({**good, "id": "2", "attachments": [{"size": "huge"}]})))
    for key, body in rows:
        assert await store.accept_update("discord", key, chat=f"{DM}//{USER}", body=body)
    async with running(bridge(rig.gateway, api.url)):
        await api.fake.wait_for(lambda: len(api.fake.sent()) >= 1)
    assert "Understood: still here" in _contents(api)
    assert await store.pending_updates("discord") == []
    assert "dropped stored update 0 that could not be read" in caplog.text


async def test_a_reply_to_the_bots_message_is_a_mention(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    server = Allowlist(chats=frozenset({str(GUILD)}))
    async with running(bridge(rig.gateway, api.url, allowlist=server)):
        assert await _exchange(api, "first", channel=CHANNEL, mention=True) == ["Understood: first"]
        answer = api.fake.history[CHANNEL][-1]
        assert await _exchange(api, "and then?", channel=CHANNEL, reply_to=answer) == [
            "Understood: and then?"
        ]
