"""Images that come with a message: how many one message may carry, and the checks an
image a client sends over HTTP passes before anything is stored or sent.

A chat platform's attachments are checked as they are downloaded
(`stoker.platforms.attachments`); a client's arrive as base64 in the request body, so
they are checked here, with errors that name the image and say what to fix: base64 that
does not decode, bytes that are no JPEG, PNG, GIF or WebP, a `media_type` other than what the
bytes are, more than providers take. The base64 is kept exactly as sent: the session
stores and resends the image as it came, never re-encoded.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence

from stoker.gateway.errors import BadRequest, PayloadTooLarge
from stoker.wire.blocks import MAX_IMAGE_BASE64, ImageBlock, image_type

MAX_IMAGES = 4  # per message: each costs about as much as a page of text, every turn after
SHOWN_TYPES = "JPEG, PNG, GIF or WebP"
WITHOUT_TEXT = "(sent without text)"  # the user's words, when there are none
_DATA_URL = re.compile(r"data:([a-zA-Z0-9.+/-]{1,100});base64,(.*)", re.S)


def data_url(url: object) -> tuple[str, str] | None:
    """(media_type, base64) of a `data:` URL; None for anything else (an http URL)."""
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    return (match[1].lower(), match[2]) if match else None


def image_blocks(images: Sequence[tuple[str, str]]) -> tuple[ImageBlock, ...]:
    """(media_type, base64 data) pairs as image blocks, or the error for the first bad one."""
    if len(images) > MAX_IMAGES:
        raise BadRequest(f"a message carries at most {MAX_IMAGES} images, not {len(images)}")
    blocks = []
    for i, (media_type, data) in enumerate(images):
        if len(data) > MAX_IMAGE_BASE64:
            raise PayloadTooLarge(
                f"images[{i}] has {len(data):,} characters of base64; providers take at most "
                f"{MAX_IMAGE_BASE64:,} (about {MAX_IMAGE_BASE64 * 3 // 4 // 1_000_000} MB)"
            )
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest(
                f"images[{i}].data is not base64 (standard alphabet, padded, no line breaks)"
            ) from None
        actual = image_type(raw)
        if actual is None:
            raise BadRequest(f"images[{i}] is not a {SHOWN_TYPES} image")
        if actual != media_type:
            raise BadRequest(f"images[{i}] is {actual}, not {media_type}: send its real media_type")
        blocks.append(ImageBlock(media_type=actual, data=data))
    return tuple(blocks)
