"""Files shared on Slack, end to end: slack-sdk and the adapter's download against the
fake Slack (signed events in, files out behind the bot token), the real gateway and
store (both backends), the simulator as the model."""

from __future__ import annotations

import base64
import logging

import pytest

from stoker.gateway.images import MAX_IMAGES
from stoker.platforms.slack.adapter import NO_SCOPE
from stoker.store.base import SqlEventStore
from stoker.wire.blocks import MAX_IMAGE_BYTES, ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from tests.images import png
from tests.platform_checks import chat_rig
from tests.slack_rig import DM, TOKEN, USER, Api, Slack, api, bridge, slack_to

__all__ = ["api"]


async def _exchange(slack: Slack, text: str, files: list[dict[str, object]], replies: int) -> None:
    before = len(slack.fake.sent())
    assert await slack.deliver(slack.fake.event(text, files=files)) == 200
    await slack.fake.wait_for(lambda: len(slack.fake.sent()) >= before + replies)


async def _asked(store: SqlEventStore) -> list[tuple[object, ...]]:
    sid = await store.chat_session("slack", f"{DM}//{USER}")
    assert sid is not None
    stored = await store.load(sid)
    return [m.content for m in stored.messages if isinstance(m, UserMessage)]


async def test_an_image_and_a_text_file_reach_the_model_after_the_text_in_their_order(
    store: SqlEventStore, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rig = chat_rig(store)
    chart = png(64, 48)
    rows = "day,sales\nmon,3\ntue,5\n"
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        shared = [
            api.fake.file("chart.png", "image/png", chart),
            api.fake.file("sales.csv", "text/csv", rows.encode()),
        ]
        await _exchange(slack, "compare these", shared, replies=1)
    assert await _asked(store) == [
        (
            TextBlock(text="compare these"),
            ImageBlock(media_type="image/png", data=base64.b64encode(chart).decode()),
            TextBlock(text=f'<file name="sales.csv">\n{rows}\n</file>'),
        )
    ]
    (answer,) = api.fake.texts()
    assert answer.startswith("Understood: compare these\n")
    # downloaded with the bot token, which no log line shows
    assert api.fake.sent("download") == [
        {"file": "file1", "authorized": True},
        {"file": "file2", "authorized": True},
    ]
    assert TOKEN not in caplog.text
    assert await store.pending_updates("slack") == []


async def test_a_download_slack_refuses_says_which_scope_is_missing_and_the_text_is_answered(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    api.fake.files_read = False  # the app was installed without the files:read scope
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        shared = [api.fake.file("chart.png", "image/png", png(8, 8))]
        await _exchange(slack, "what is it?", shared, replies=2)
    assert api.fake.texts() == [
        f"Not passed to the model:\n- chart.png: {NO_SCOPE}",
        "Understood: what is it?",
    ]
    # the sign-in page Slack redirects to is never asked for, with or without the token
    assert [name for name, _ in api.fake.calls if name == "download"] == ["download"]


async def test_files_the_model_cannot_take_get_a_clear_reply_and_nothing_else(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        shared = [
            api.fake.file("clip.webm", "audio/webm", b"\x1aE\xdf\xa3" + bytes(300)),
            api.fake.file("slides.pdf", "application/pdf", b"%PDF-1.7" + bytes(300)),
        ]
        await _exchange(slack, "", shared, replies=1)
    assert api.fake.texts() == [
        "Not passed to the model:\n"
        "- clip.webm (audio/webm): voice and audio are not passed; please type what it says\n"
        "- slides.pdf (application/pdf): only images (JPEG, PNG, GIF and WebP) and text files "
        "are passed"
    ]
    assert api.fake.sent("download") == []
    assert await store.chat_session("slack", f"{DM}//{USER}") is None  # no turn, no session
    assert await store.list_sessions() == []


async def test_a_download_longer_than_slack_said_stops_at_the_limit(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        shared = [api.fake.file("photo.png", "image/png", png(8, 8), stated=900, endless=True)]
        await _exchange(slack, "look", shared, replies=2)
    assert api.fake.texts() == [
        "Not passed to the model:\n- photo.png: over the 3.9 MB limit",
        "Understood: look",
    ]
    assert api.fake.files.served["file1"] > MAX_IMAGE_BYTES  # it never ended: the bot stopped
    assert await _asked(store) == [(TextBlock(text="look"),)]


async def test_at_most_four_images_go_with_one_message(store: SqlEventStore, api: Api) -> None:
    rig = chat_rig(store)
    pictures = [png(8, 8, shade=i) for i in range(5)]
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        shared = [api.fake.file(f"p{i}.png", "image/png", p) for i, p in enumerate(pictures)]
        await _exchange(slack, "five", shared, replies=2)
    assert api.fake.texts()[0] == (
        f"Not passed to the model:\n- p4.png: at most {MAX_IMAGES} images are passed per message"
    )
    assert await _asked(store) == [
        (
            TextBlock(text="five"),
            *(
                ImageBlock(media_type="image/png", data=base64.b64encode(p).decode())
                for p in pictures[:MAX_IMAGES]
            ),
        )
    ]


async def test_the_bot_token_goes_to_no_link_but_slacks_and_a_missing_link_is_named(
    store: SqlEventStore, api: Api
) -> None:
    rig = chat_rig(store)
    async with slack_to(rig.gateway, bridge(rig.gateway, api.url), api) as slack:
        elsewhere = api.fake.file("a.png", "image/png", png(8, 8))
        elsewhere["url_private_download"] = "https://files.evil.example/a.png"
        hidden = api.fake.file("b.png", "image/png", png(8, 8))
        del hidden["url_private_download"]  # a free plan's hidden file, or a deleted one
        await _exchange(slack, "and these?", [elsewhere, hidden], replies=2)
    assert api.fake.texts() == [
        "Not passed to the model:\n"
        "- a.png: its download link is not Slack's\n"
        "- b.png: Slack gave no download link (hidden by the plan, or deleted)",
        "Understood: and these?",
    ]
    assert api.fake.sent("download") == []  # neither was asked for, with the token or not
