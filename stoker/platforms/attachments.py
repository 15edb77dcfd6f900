"""What a message's attachments become: content blocks for the model, or one reply that
says which were not passed and why.

Every platform goes through here, so the rules are the same everywhere. In the order the
user sent them:

- an image (JPEG, PNG, GIF or WebP, told by its first bytes, whatever the platform called
  it) of at most `MAX_IMAGE_BYTES` (Anthropic's 5 MB per image, counted as base64), at
  most `MAX_IMAGES` per message, goes as an image block, when the session's model takes
  images (`images` in the model facts);
- a text file (text/*, JSON, XML, YAML, TOML, ... or a name like `notes.md`) that is
  UTF-8 goes as a text block naming it, up to `text_limit` bytes for all of a message's
  files together: the gateway's `max_message_chars` (100,000 by default, about 25k
  tokens), since a file is read like a message, at every later turn;
- anything else (voice, video, stickers, PDFs, an image over the limit or to a text-only
  model) is named in the reply, and nothing of it is downloaded.

A size the platform states is checked before downloading; the download itself stops at
the limit (`Adapter.fetch`), whatever was stated. A download the platform refuses is
named in the reply too. One that failed otherwise (the network) raises, so the update is
tried again later, except on its last try: then it is named in the reply, and the text
still gets its turn.
"""

from __future__ import annotations

import base64
import html
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from stoker.cache.models import ModelInfo
from stoker.gateway.images import MAX_IMAGES
from stoker.platforms.base import Adapter, Attachment, AttachmentRefused, Context
from stoker.platforms.download import size, too_large
from stoker.wire.blocks import IMAGE_TYPES, MAX_IMAGE_BYTES, ImageBlock, TextBlock, image_type

log = logging.getLogger(__name__)

NOT_PASSED = "Not passed to the model:"
# Media types of text beyond text/*; "+json" and "+xml" types count too.
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-toml",
        "application/javascript",
        "application/x-javascript",
        "application/x-sh",
        "application/x-python",
        "application/sql",
        "application/csv",
    }
)
# Names that are text when the platform says no more than "application/octet-stream".
TEXT_SUFFIXES = (
    ".txt", ".md", ".markdown", ".rst", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml",
    ".toml", ".ini", ".cfg", ".conf", ".xml", ".html", ".css", ".log", ".sql", ".sh",
    ".py", ".js", ".ts", ".go", ".rs", ".java", ".c", ".h", ".cpp", ".rb", ".php",
)  # fmt: skip
_IMAGES_SHOWN = "JPEG, PNG, GIF and WebP"


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """The blocks that go after the user's words, and a line per attachment left out."""

    blocks: tuple[ImageBlock | TextBlock, ...] = ()
    refused: tuple[str, ...] = ()

    @property
    def reply(self) -> str:
        """What the user is told ("" when everything was passed)."""
        if not self.refused:
            return ""
        return "\n".join([NOT_PASSED, *(f"- {line}" for line in self.refused)])


def is_text(attachment: Attachment) -> bool:
    kind = attachment.media_type.split(";")[0].strip().lower()
    if kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return True
    unknown = kind in ("", "application/octet-stream")
    return unknown and attachment.name.lower().endswith(TEXT_SUFFIXES)


def text_of(data: bytes) -> str | None:
    """The file's text: UTF-8 (a byte-order mark dropped) without NUL; None otherwise."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def file_block(name: str, text: str) -> TextBlock:
    """A text file as the model reads it: its content inside a tag that names it."""
    return TextBlock(text=f'<file name="{html.escape(name)}">\n{text}\n</file>')


def _what(a: Attachment) -> str:
    return f"{a.name} ({a.media_type})" if a.media_type else a.name


def _left_out(a: Attachment) -> str:
    """Why a file that is neither an image nor text is not passed."""
    family = a.media_type.split("/")[0].lower()
    if family == "audio":
        return f"{_what(a)}: voice and audio are not passed; please type what it says"
    if family == "video":
        return f"{_what(a)}: videos are not passed"
    return f"{_what(a)}: only images ({_IMAGES_SHOWN}) and text files are passed"


async def prepare(
    adapter: Adapter,
    ctx: Context,
    attachments: Sequence[Attachment],
    *,
    model: ModelInfo | None,
    text_limit: int,
    last_try: bool = False,
) -> Prepared:
    """Download and turn into blocks what `model` can take of `attachments`; name the rest.
    `model` may be None only when no attachment is an image."""
    blocks: list[ImageBlock | TextBlock] = []
    refused: list[str] = []
    images, text_left = 0, text_limit
    for a in attachments:
        if a.kind == "image":
            if model is None:
                raise ValueError("an image needs the model, to know whether it takes images")
            if not model.images:
                refused.append(f"{a.name}: the model of this chat ({model.name}) reads text only")
            elif a.media_type and a.media_type.lower() not in IMAGE_TYPES:
                refused.append(f"{_what(a)}: only {_IMAGES_SHOWN} images are passed")
            elif images >= MAX_IMAGES:
                refused.append(f"{a.name}: at most {MAX_IMAGES} images are passed per message")
            elif a.size > MAX_IMAGE_BYTES:
                refused.append(f"{a.name}: {too_large(a.size, MAX_IMAGE_BYTES)}")
            elif isinstance(got := await _fetch(adapter, ctx, a, MAX_IMAGE_BYTES, last_try), str):
                refused.append(got)
            elif (media_type := image_type(got)) is None:
                refused.append(f"{a.name}: not a {_IMAGES_SHOWN} image")
            else:
                images += 1
                data = base64.b64encode(got).decode("ascii")
                blocks.append(ImageBlock(media_type=media_type, data=data))
        elif not is_text(a):
            refused.append(_left_out(a))
        elif a.size > text_left:
            refused.append(
                f"{a.name}: {size(a.size)}; text files are passed up to {size(text_limit)} "
                "per message"
            )
        elif isinstance(got := await _fetch(adapter, ctx, a, text_left, last_try), str):
            refused.append(got)
        elif (text := text_of(got)) is None:
            refused.append(f"{a.name}: not UTF-8 text")
        else:
            text_left -= len(got)
            blocks.append(file_block(a.name, text))
    return Prepared(blocks=tuple(blocks), refused=tuple(refused))


async def _fetch(
    adapter: Adapter, ctx: Context, a: Attachment, limit: int, last_try: bool
) -> bytes | str:
    """The attachment's bytes, or the line saying why there are none."""
    try:
        return await adapter.fetch(ctx, a, limit)
    except AttachmentRefused as exc:
        return f"{a.name}: {exc}"
    except Exception as exc:
        if not last_try:
            raise  # passing, likely: the update is tried again
        # The exception's text may hold a URL with a token in it: only its type is logged.
        log.warning("%s: downloading an attachment failed: %s", adapter.name, type(exc).__name__)
        return f"{a.name}: the download from {adapter.name} failed; please send it again"
