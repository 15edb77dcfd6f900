"""Images with a message over HTTP (`POST /v1/sessions/{sid}/messages` with `images`):
they reach the model after the text, as sent, and every bad one is a 4xx that names it
and says what to fix, with nothing stored and no provider call."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.store.base import SqlEventStore
from stoker.wire.blocks import MAX_IMAGE_BASE64, ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from tests.images import png
from tests.test_gateway_api import _session
from tests.test_gateway_blocks import _TextOnly
from tests.test_gateway_support import auth, client, make_rig

PNG = png(16, 12)
GIF = b"GIF89a" + bytes(40)


def _image(data: bytes, media_type: str = "image/png") -> dict[str, str]:
    return {"media_type": media_type, "data": base64.b64encode(data).decode()}


async def _asked(store: SqlEventStore, sid: str) -> list[tuple[Any, ...]]:
    stored = await store.load(sid)
    return [m.content for m in stored.messages if isinstance(m, UserMessage)]


async def test_images_reach_the_model_after_the_text_as_sent(store: SqlEventStore) -> None:
    rig = make_rig(store)
    async with client(rig) as c:
        sid = await _session(c)
        images = [_image(PNG), _image(GIF, "image/gif")]
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "compare", "images": images},
            headers=auth("alice"),
        )
        assert r.status_code == 200, r.text
        plain = await c.post(
            f"/v1/sessions/{sid}/messages", json={"text": "and now?"}, headers=auth("alice")
        )
        assert plain.status_code == 200
    assert await _asked(store, sid) == [
        (
            TextBlock(text="compare"),
            ImageBlock(media_type="image/png", data=images[0]["data"]),
            ImageBlock(media_type="image/gif", data=images[1]["data"]),
        ),
        (TextBlock(text="and now?"),),
    ]
    first, second = (json.dumps(r) for r in rig.sim.requests)
    for image in images:  # sent with its turn, and again (from the cache) with the next
        assert image["data"] in first
        assert image["data"] in second


async def test_a_bad_image_is_a_4xx_that_names_it_and_nothing_runs(store: SqlEventStore) -> None:
    rig = make_rig(store)
    cases: list[tuple[list[dict[str, str]], int, str]] = [
        ([_image(PNG, "image/jpeg")], 400, "images[0] is image/png, not image/jpeg"),
        ([_image(PNG), {"media_type": "image/png", "data": "no base64!"}], 400, "images[1].data"),
        ([_image(b"%PDF-1.7 not an image")], 400, "images[0] is not a JPEG, PNG, GIF or WebP"),
        ([_image(PNG)] * 5, 400, "at most 4 images, not 5"),
        ([{"media_type": "image/png", "data": "A" * (MAX_IMAGE_BASE64 + 4)}], 413, "images[0]"),
        ([{"media_type": "image/png"}], 400, "images.0.data"),
    ]
    async with client(rig, max_body_bytes=8 * 1024 * 1024) as c:
        sid = await _session(c)
        for images, status, fragment in cases:
            r = await c.post(
                f"/v1/sessions/{sid}/messages",
                json={"text": "look", "images": images},
                headers=auth("alice"),
            )
            assert r.status_code == status, (fragment, r.text)
            assert fragment in r.text
    assert rig.sim.requests == []
    assert await _asked(store, sid) == []


async def test_an_image_to_a_text_only_model_is_refused_before_any_call(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    rig.provider = _TextOnly(rig.sim)  # type: ignore[assignment]
    async with client(rig) as c:
        sid = await _session(c)
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "look", "images": [_image(PNG)]},
            headers=auth("alice"),
        )
    assert r.status_code == 400
    assert "reads text only: send the message without images" in r.text
    assert rig.sim.requests == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(max_size=64) | st.text(max_size=64).map(str.encode),
    kind=st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", ""]),
)
async def test_any_image_bytes_get_a_turn_or_a_400_never_a_server_error(
    store: SqlEventStore, data: bytes, kind: str
) -> None:
    rig = make_rig(store)
    async with client(rig) as c:
        sid = await _session(c)
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "what is it?", "images": [_image(data, kind)]},
            headers=auth("alice"),
        )
    assert r.status_code in (200, 400), r.text
    assert (r.status_code == 200) == (len(rig.sim.requests) == 1)
