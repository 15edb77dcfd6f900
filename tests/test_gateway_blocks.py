"""`Gateway.send` with blocks (a chat platform's images and files), as a library call on
the simulator and both stores: the text first and the blocks after it in one user
message, a retry recognized by the text, and the refusals made before any provider call."""

from __future__ import annotations

import base64

import pytest

from stoker.gateway.errors import BadRequest
from stoker.store.base import SqlEventStore
from stoker.wire.blocks import ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from tests.images import png
from tests.test_gateway_support import make_rig
from tests.test_platform_telegram_files import _TextOnly

USER = "alice"
IMAGE = ImageBlock(media_type="image/png", data=base64.b64encode(png(16, 16)).decode())
NOTES = TextBlock(text='<file name="a.txt">\nhello\n</file>')


async def test_blocks_follow_the_text_and_a_retry_of_the_key_replays_the_answer(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    sid = await rig.gateway.create_session(USER)
    assert (await rig.gateway.model_info(USER, sid)).images
    first = await rig.gateway.send(USER, sid, "look", blocks=[IMAGE, NOTES], idempotency_key="k1")
    again = await rig.gateway.send(USER, sid, "look", blocks=[IMAGE, NOTES], idempotency_key="k1")
    plain = await rig.gateway.send(USER, sid, "and text")
    assert (first.replayed, again.replayed, again.text) == (False, True, first.text)
    stored = await store.load(sid)
    asked = [m.content for m in stored.messages if isinstance(m, UserMessage)]
    assert asked == [(TextBlock(text="look"), IMAGE, NOTES), (TextBlock(text="and text"),)]
    assert plain.text == "Understood: and text"
    assert len(rig.sim.requests) == 2


async def test_images_to_a_text_only_model_and_files_with_a_command_are_refused(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    rig.provider = _TextOnly(rig.sim)  # type: ignore[assignment]
    sid = await rig.gateway.create_session(USER)
    assert not (await rig.gateway.model_info(USER, sid)).images
    with pytest.raises(BadRequest, match="reads text only: send the message without images"):
        await rig.gateway.send(USER, sid, "look", blocks=[IMAGE])
    with pytest.raises(BadRequest, match="/usage is a command"):
        await rig.gateway.send(USER, sid, "/usage", blocks=[NOTES])
    await rig.gateway.send(USER, sid, "thanks", blocks=[NOTES])  # text it can take
    assert len(rig.sim.requests) == 1
    stored = await store.load(sid)
    assert [m.content for m in stored.messages if isinstance(m, UserMessage)] == [
        (TextBlock(text="thanks"), NOTES)
    ]
