"""Discord's messages and interactions as the store keeps them, and as the bridge reads
them back.

The store keeps a small dict per update (`raw_message`, `raw_press`, `raw_command`), not
discord.py's objects: the text as the model reads it (the bot's mention taken out), the
ids that key its chat, and the attachments as Discord describes them. `parse` turns one
back into a `Message` or a `ButtonPress`. A thread is a channel of its own, so it is its
own chat; the server (guild) is the chat's `space`, for allowing a whole server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import discord

from stoker.platforms.base import Attachment, ButtonPress, ChatKey, Message, Update, read_by_type

NAME = "discord"
PRESS = "stoker:"  # custom_id prefix of this adapter's buttons: "stoker:TOKEN:INDEX"
_ANSWERED = (discord.MessageType.default, discord.MessageType.reply)


def parse(raw: Mapping[str, Any]) -> Update | None:
    return read_by_type(raw, {"message": _message, "press": _press})


def raw_message(message: discord.Message, *, me: int, dm: bool) -> dict[str, Any] | None:
    """What the store keeps of a message the bot (user `me`) should answer: every one in
    a direct message, a mention of the bot elsewhere; None otherwise."""
    if message.author.bot or message.webhook_id or message.type not in _ANSWERED:
        return None  # bots (this one too), webhooks, joins, pins: not a user talking
    mentioned = any(u.id == me for u in message.mentions) or me in message.raw_mentions
    if not dm and not mentioned:
        return None
    guild = message.guild.id if message.guild else getattr(message.channel, "guild_id", None)
    return {
        "type": "message",
        "id": str(message.id),
        "channel_id": str(message.channel.id),
        "guild_id": str(guild) if guild else "",
        "author_id": str(message.author.id),
        "text": re.sub(rf"<@!?{me}>", "", message.content).strip(),
        "attachments": [
            {
                "filename": a.filename,
                "content_type": a.content_type or "",
                "size": a.size,
                "url": a.url,
            }
            for a in message.attachments
        ],
    }


def _from(interaction: discord.Interaction) -> dict[str, str]:
    """An interaction's id and where it came from, as a raw update holds them."""
    return {
        "id": str(interaction.id),
        "channel_id": str(interaction.channel_id or ""),
        "guild_id": str(interaction.guild_id or ""),
    }


def raw_press(interaction: discord.Interaction, custom_id: str) -> dict[str, Any]:
    return {
        "type": "press",
        **_from(interaction),
        "user_id": str(interaction.user.id),
        "custom_id": custom_id,
    }


def raw_command(interaction: discord.Interaction, data: Mapping[str, Any]) -> dict[str, Any]:
    """A slash command, as the message typing it would be (`/model NAME`)."""
    args = [str(o.get("value", "")) for o in data.get("options") or () if isinstance(o, dict)]
    return {
        "type": "message",
        **_from(interaction),
        "author_id": str(interaction.user.id),
        "text": " ".join([f"/{data.get('name', '')}", *args]).strip(),
        "attachments": [],
    }


def _key(raw: Mapping[str, Any], channel: str, user: str) -> ChatKey:
    return ChatKey(platform=NAME, chat=channel, user=user, space=str(raw.get("guild_id") or ""))


def _message(raw: Mapping[str, Any]) -> Message | None:
    update, channel, user = raw.get("id"), raw.get("channel_id"), raw.get("author_id")
    if not (isinstance(update, str) and isinstance(channel, str) and isinstance(user, str)):
        return None
    text, files = str(raw.get("text") or ""), raw.get("attachments")
    attachments = (
        tuple(_attachment(f) for f in files if isinstance(f, Mapping))
        if isinstance(files, list)
        else ()
    )
    if not text and not attachments:
        return None
    return Message(id=update, key=_key(raw, channel, user), text=text, attachments=attachments)


def _attachment(f: Mapping[str, Any]) -> Attachment:
    """A message's attachment: an image when Discord's content type says so."""
    media_type, given = str(f.get("content_type") or ""), f.get("size")
    return Attachment(
        kind="image" if media_type.startswith("image/") else "file",
        name=str(f.get("filename") or "file"),
        media_type=media_type.partition(";")[0].strip(),
        size=given if isinstance(given, int) and given > 0 else 0,
        ref=str(f.get("url") or ""),
    )


def _press(raw: Mapping[str, Any]) -> ButtonPress | None:
    token, _, index = str(raw.get("custom_id") or "").removeprefix(PRESS).rpartition(":")
    channel, user = raw.get("channel_id"), raw.get("user_id")
    if not (token and index.isdigit() and isinstance(channel, str) and isinstance(user, str)):
        return None
    key = _key(raw, channel, user)
    return ButtonPress(id=str(raw.get("id")), key=key, question=token, choice=int(index))
