"""Photos and files on Telegram, end to end: python-telegram-bot against the fake Bot API
(getFile and the file server included), the real gateway and store (both backends), the
simulator as the model. What reaches the model is read from the stored session and from
the payloads the simulator received."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

from stoker.cache.models import ModelInfo
from stoker.gateway.images import WITHOUT_TEXT
from stoker.platforms.access import RateLimit
from stoker.platforms.bridge import MAX_ATTEMPTS
from stoker.providers.base import ProviderWrapper
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.wire.blocks import MAX_IMAGE_BYTES, ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from tests.images import png
from tests.platform_checks import Crash, chat_rig, restarted, running
from tests.telegram_rig import USER, Api, api, bridge

__all__ = ["api"]


def _image(data: bytes, media_type: str = "image/png") -> ImageBlock:
    return ImageBlock(media_type=media_type, data=base64.b64encode(data).decode())


async def _asked(store: SqlEventStore) -> list[tuple[Any, ...]]:
    """The content of each user message the chat's session stored, in order."""
    sid = await store.chat_session("telegram", f"{USER}//{USER}")
    assert sid is not None
    stored = await store.load(sid)
    return [m.content for m in stored.messages if isinstance(m, UserMessage)]


def _sim(rig: Any) -> SimProvider:
    sim = rig.provider
    assert isinstance(sim, SimProvider)
    return sim


async def test_a_photo_reaches_the_model_as_an_image_after_its_caption(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        # Telegram offers each photo in sizes: the largest within the image limit is taken
        api.fake.photo("what is in it?", sizes=((90, 90), (320, 320)))
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
        api.fake.photo()  # no caption: the model still gets the photo
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    assert api.fake.texts() == ["Understood: what is in it?", f"Understood: {WITHOUT_TEXT}"]
    assert await _asked(store) == [
        (TextBlock(text="what is in it?"), _image(png(320, 320))),
        (TextBlock(text=WITHOUT_TEXT), _image(png(90, 90))),
    ]
    # the provider received it as Anthropic's image block, after the text
    sent = _sim(rig).requests[0]["messages"][-1]["content"]
    assert [b["type"] for b in sent] == ["text", "image"]
    assert sent[1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(png(320, 320)).decode(),
    }
    assert [p["file_id"] for p in api.fake.sent("getFile")] == ["file2", "file3"]
    assert await store.pending_updates("telegram") == []


async def test_a_text_document_arrives_as_a_text_block_naming_it(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    notes = "# Plan\n\n- ship on friday — «déjà vu»\n"
    async with running(bridge(rig.gateway, api.url)):
        api.fake.document(notes.encode(), "plan.md", "text/markdown", "summarize this")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    (answer,) = api.fake.texts()  # the rule model repeats what it read: the file too
    assert answer.startswith('Understood: summarize this\n&lt;file name="plan.md"&gt;\n')
    assert "ship on friday — «déjà vu»" in answer
    assert await _asked(store) == [
        (
            TextBlock(text="summarize this"),
            TextBlock(text=f'<file name="plan.md">\n{notes}\n</file>'),
        )
    ]


async def test_what_the_model_cannot_take_gets_a_clear_reply_and_the_caption_its_answer(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.voice("listen to this")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
        api.fake.document(b"%PDF-1.7\n" + bytes(500), "report.pdf", "application/pdf")
        api.fake.document(b"\xff\xfe\x00binary", "data.txt", "text/plain", "and this?")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 5)
    assert api.fake.texts() == [
        "Not passed to the model:\n"
        "- voice message (audio/ogg): voice and audio are not passed; please type what it says",
        "Understood: listen to this",
        # a file only, and nothing of it usable: the reply, and no turn
        "Not passed to the model:\n"
        "- report.pdf (application/pdf): only images (JPEG, PNG, GIF and WebP) and text "
        "files are passed",
        "Not passed to the model:\n- data.txt: not UTF-8 text",
        "Understood: and this?",
    ]
    assert await _asked(store) == [
        (TextBlock(text="listen to this"),),
        (TextBlock(text="and this?"),),
    ]
    # nothing was downloaded that could not be passed: the voice note and the PDF stayed
    assert [p["file_id"] for p in api.fake.sent("getFile")] == ["file3"]
    assert await store.pending_updates("telegram") == []


class _TextOnly(ProviderWrapper):
    """The simulator, serving its model as one that reads text only."""

    def model_info(self, model: str) -> ModelInfo:
        return replace(self.inner.model_info(model), images=False)


async def test_a_chat_whose_model_reads_text_only_is_told_and_its_caption_answered(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    rig.provider = _TextOnly(_sim(rig))  # type: ignore[assignment]
    model = rig.gateway.defaults.model
    async with running(bridge(rig.gateway, api.url)):
        api.fake.photo("what is in it?")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    assert api.fake.texts() == [
        f"Not passed to the model:\n- photo: the model of this chat ({model}) reads text only",
        "Understood: what is in it?",
    ]
    assert await _asked(store) == [(TextBlock(text="what is in it?"),)]
    assert api.fake.sent("getFile") == []  # not downloaded for nothing


async def test_an_image_over_the_limit_is_refused_without_being_downloaded(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    big = png(40, 40)
    async with running(bridge(rig.gateway, api.url)):
        # Telegram states the size: one over the limit is not even asked for
        api.fake.document(big, "scan.png", "image/png", "too big?", stated=MAX_IMAGE_BYTES + 1)
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
        # a size Telegram understates, of a download that never ends: it stops at the limit
        api.fake.document(
            png(40, 40), "huge.png", "image/png", "and this?", stated=1000, endless=True
        )
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 4)
    assert api.fake.texts() == [
        "Not passed to the model:\n- scan.png: 3.9 MB, over the 3.9 MB limit",
        "Understood: too big?",
        "Not passed to the model:\n- huge.png: over the 3.9 MB limit",
        "Understood: and this?",
    ]
    assert [p["file_id"] for p in api.fake.sent("getFile")] == ["file2"]
    assert api.fake.files.served["file2"] > MAX_IMAGE_BYTES
    assert await _asked(store) == [(TextBlock(text="too big?"),), (TextBlock(text="and this?"),)]


async def test_text_files_are_passed_up_to_the_limit_of_a_message(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        limit = rig.gateway.max_message_chars  # a file is read like a message
        # (a caption about no tool: "read it" would have the demo model call read_file)
        api.fake.document(b"x" * (limit + 1), "big.log", "text/plain", "what does it say?")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    assert api.fake.texts() == [
        "Not passed to the model:\n- big.log: 100 kB; text files are passed up to 100 kB "
        "per message",
        "Understood: what does it say?",
    ]


async def test_a_restart_before_the_turn_downloads_the_photo_again_from_the_stored_update(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    api.fake.fail_next["getFile"] = 1000  # Telegram's file API is down: nothing is lost
    first = bridge(rig.gateway, api.url)
    await first.start()
    update = api.fake.photo("what is in it?")
    await api.fake.wait_for(lambda: len(api.fake.sent("getFile")) == 1)
    await first.idle()
    await first.stop()
    assert [p.key for p in await store.pending_updates("telegram")] == [str(update["update_id"])]
    assert api.fake.sent() == []
    api.fake.fail_next["getFile"] = 0
    async with restarted(rig, store) as gateway:
        async with running(bridge(gateway, api.url)):
            await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
        assert api.fake.texts() == ["Understood: what is in it?"]
        asked = await _asked(gateway.store)
        assert asked == [(TextBlock(text="what is in it?"), _image(png(90, 90)))]
        assert await gateway.store.pending_updates("telegram") == []


async def test_a_download_that_keeps_failing_is_named_at_the_last_try_and_the_caption_answered(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    api.fake.fail_next["getFile"] = 1000
    async with running(bridge(rig.gateway, api.url, retry_every=0.05)):
        api.fake.photo("what is in it?")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    assert api.fake.texts() == [
        "Not passed to the model:\n- photo: the download from telegram failed; please send "
        "it again",
        "Understood: what is in it?",
    ]
    assert len(api.fake.sent("getFile")) == MAX_ATTEMPTS
    assert await store.pending_updates("telegram") == []


async def test_the_message_after_an_image_reads_the_whole_prefix_with_the_image(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url)):
        api.fake.user_message("hello")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
        api.fake.photo("what is in it?", sizes=((320, 320),))
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
        api.fake.user_message("and now?")
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 3)
    sid = await store.chat_session("telegram", f"{USER}//{USER}")
    assert sid is not None
    view = await rig.gateway.view(f"telegram:{USER}", sid)
    hello, with_image, after = (view.turns[i].records[0] for i in range(3))
    # Anthropic's rule: the first image salts the conversation's part of the prefix, so
    # that call reads tools and system only and writes the conversation again...
    assert 0 < with_image.usage.read < hello.usage.read + hello.usage.written
    assert with_image.explanation.classification == "first image"  # and its record says so
    # ...and the one after it reads everything, the image included
    assert after.explanation.verdict == "hit"
    assert after.usage.read == with_image.usage.read + with_image.usage.written
    # the image is in what was read: its tokens (Anthropic's rule, 320 x 320 / 750) and more
    image_tokens = 137
    assert with_image.usage.written > image_tokens


async def test_a_turn_cut_off_with_its_photo_is_finished_after_a_restart_not_sent_twice(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    crash = Crash(rig)  # the provider hangs on the turn whose text starts with "stuck"
    first = bridge(rig.gateway, api.url)
    await first.start()
    update = api.fake.photo("stuck: what is in it?")
    # the process dies mid-turn, its user message stored
    await crash.kill(first, str(update["update_id"]), lease=0.1)
    second = bridge(rig.another_process(store), api.url, retry_every=0.2)
    async with running(second):
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert api.fake.texts() == ["Understood: stuck: what is in it?"]
    # the photo went once, with its text; the restart finished that turn
    assert await _asked(store) == [(TextBlock(text="stuck: what is in it?"), _image(png(90, 90)))]
    assert len(crash.sim.requests) == 1
    assert await store.pending_updates("telegram") == []


async def test_an_album_is_answered_once_whole_and_counts_once_against_the_rate_limit(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with running(bridge(rig.gateway, api.url, rate=RateLimit(per_minute=1, burst=2))):
        api.fake.album("compare these three", 3)
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 1)
    assert api.fake.texts() == ["Understood: compare these three"]
    shots = [png(40, 30, shade=i) for i in range(3)]
    assert await _asked(store) == [
        (TextBlock(text="compare these three"), *(_image(p) for p in shots))
    ]
    assert len(_sim(rig).requests) == 1
    assert await store.pending_updates("telegram") == []


async def test_an_album_sent_while_the_gateway_was_down_is_answered_once_after_it(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    api.fake.album("", 2)  # queued at Telegram before the bot polls
    api.fake.user_message("and this one?")
    async with running(bridge(rig.gateway, api.url)):
        await api.fake.wait_for(lambda: len(api.fake.sent()) == 2)
    assert api.fake.texts() == [f"Understood: {WITHOUT_TEXT}", "Understood: and this one?"]
    shots = [png(40, 30, shade=i) for i in range(2)]
    assert await _asked(store) == [
        (TextBlock(text=WITHOUT_TEXT), *(_image(p) for p in shots)),
        (TextBlock(text="and this one?"),),
    ]
