"""Telegram's updates as the bridge reads them: a message (its text or caption, and what
it carried) or a press of a question's button.

A photo is the largest of the sizes Telegram offers that fits the image limit; a
document, voice note, video or sticker is an `Attachment` with Telegram's media type.
In a group, a command addressed to a bot (`/new@this_bot`) is this bot's only when it
names it. A forum topic is a thread of its group; the parts of an album share its
`media_group_id`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from telegram import Bot, PhotoSize, Update
from telegram import Message as TgMessage

from stoker.platforms.base import Attachment, ButtonPress, ChatKey, Message
from stoker.platforms.base import Update as PlatformUpdate
from stoker.wire.blocks import MAX_IMAGE_BYTES

NAME = "telegram"
_COMMAND = re.compile(r"^(/\w+)@(\w+)")


def parse(raw: Mapping[str, Any], *, bot: Bot | None, username: str) -> PlatformUpdate | None:
    """`raw` (an update as Telegram sent it) for the bot `username`; None for what it
    does not answer (another bot's command, a bot's message, an empty one)."""
    update = Update.de_json(dict(raw), bot)
    query = update.callback_query
    if query is not None:
        token, _, index = (query.data or "").rpartition(":")
        chat = query.message.chat.id if query.message is not None else query.from_user.id
        if not token or not index.isdigit():
            return None
        key = ChatKey(platform=NAME, chat=str(chat), user=str(query.from_user.id))
        return ButtonPress(id=query.id, key=key, question=token, choice=int(index))
    m = update.message
    if m is None or m.from_user is None or m.from_user.is_bot:
        return None
    text = m.text or m.caption or ""
    command = _COMMAND.match(text)
    if command is not None:  # "/new@this_bot" in a group; another bot's is not ours
        if command[2].lower() != username.lower():
            return None
        text = command[1] + text[command.end() :]
    attachments = _attachments(m)
    if not text and not attachments:
        return None
    thread = str(m.message_thread_id) if m.is_topic_message and m.message_thread_id else ""
    key = ChatKey(platform=NAME, chat=str(m.chat.id), thread=thread, user=str(m.from_user.id))
    return Message(
        id=str(update.update_id),
        key=key,
        text=text,
        attachments=attachments,
        group=m.media_group_id or "",
    )


def _photo(sizes: Sequence[PhotoSize]) -> Attachment:
    """The largest size that fits the image limit (the smallest when none says it does)."""
    fits = [p for p in sizes if (p.file_size or 0) <= MAX_IMAGE_BYTES]
    best = (
        max(fits, key=lambda p: p.width * p.height)
        if fits
        else min(sizes, key=lambda p: p.file_size or 0)
    )
    return Attachment(
        kind="image",
        name="photo",
        media_type="image/jpeg",
        size=best.file_size or 0,
        ref=best.file_id,
    )


def _attachments(m: TgMessage) -> tuple[Attachment, ...]:
    """What the message carries besides text. Telegram sets `document` too on an
    animation (a GIF, sent as MP4), for old clients: it is one attachment."""
    if m.photo:
        return (_photo(m.photo),)
    found: list[tuple[str, str | None, Any]] = []  # (name, media type, the file)
    if m.animation is not None:
        found.append((m.animation.file_name or "animation", m.animation.mime_type, m.animation))
    elif m.document is not None:
        found.append((m.document.file_name or "document", m.document.mime_type, m.document))
    if m.audio is not None:
        found.append((m.audio.file_name or m.audio.title or "audio", m.audio.mime_type, m.audio))
    if m.voice is not None:
        found.append(("voice message", m.voice.mime_type or "audio/ogg", m.voice))
    if m.video is not None:
        found.append((m.video.file_name or "video", m.video.mime_type or "video/mp4", m.video))
    if m.video_note is not None:
        found.append(("video message", "video/mp4", m.video_note))
    if m.sticker is not None:
        st = m.sticker
        sticker_type = (
            "video/webm" if st.is_video else "application/x-tgsticker" if st.is_animated
            else "image/webp"
        )  # fmt: skip
        found.append(("sticker", sticker_type, st))
    return tuple(
        Attachment(
            # an image sent as a file is still one the model may see; a sticker is not
            kind="image" if (t or "").startswith("image/") and f is m.document else "file",
            name=name,
            media_type=t or "",
            size=f.file_size or 0,
            ref=f.file_id,
        )
        for name, t, f in found
    )
