"""Slack's payloads as the bridge reads them: a message event, a press of a question's
button (`block_actions`), or a slash command, each as Slack delivers it over HTTP or in
a Socket Mode envelope.

Which messages are answered: every one in a direct message with the app; in a channel,
those that mention it (`@stoker ...`), and in a thread where a user talked with it (their
mention in the thread started a session), their later messages there without one (a
`followup`, answered only when that user has a session there). The `app_mention` event
is ignored: the `message` event carries the same message, and answering both would
answer twice. Files shared with a message are `Attachment`s with Slack's `mimetype`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from stoker.platforms.base import Attachment, ButtonPress, ChatKey, Message, Update, read_by_type

NAME = "slack"
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


def parse(raw: Mapping[str, Any]) -> Update | None:
    """An event, a press or a slash command (`type` as `inbound` stores each)."""
    return read_by_type(
        raw, {"event_callback": _message, "block_actions": _press, "slash_command": _command}
    )


def posted_at(raw: Mapping[str, Any]) -> str:
    """The timestamp of the user's message an event carries ("" for none): where the
    app shows it is working on it."""
    event = raw.get("event")
    ts = event.get("ts") if isinstance(event, Mapping) else None
    return ts if isinstance(ts, str) else ""


def public(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The payload without Slack's legacy verification `token`, which is never stored."""
    return {k: v for k, v in raw.items() if k != "token"}


def unwrap(kind: str, payload: Any) -> dict[str, Any] | None:
    """What a Socket Mode envelope carries, as the HTTP routes would have received it."""
    if not isinstance(payload, dict):
        return None
    if kind == "events_api" and payload.get("type") == "event_callback":
        return payload if isinstance(payload.get("event_id"), str) else None
    if kind == "interactive" and payload.get("type") == "block_actions":
        return payload
    if kind == "slash_commands":
        return {**payload, "type": "slash_command"}
    return None  # acknowledged and dropped: not a kind the app handles


def _bot_user(raw: Mapping[str, Any]) -> str:
    """The app's own user id, from the event's `authorizations` (no call needed)."""
    given = raw.get("authorizations")
    for a in given if isinstance(given, list) else ():
        if isinstance(a, Mapping) and a.get("is_bot") and isinstance(a.get("user_id"), str):
            return str(a["user_id"])
    return ""


def _text(text: str, bot: str) -> tuple[str, bool]:
    """A user's text as the model reads it (the app's mention taken out, entities
    unescaped), and whether it mentioned the app."""
    mentioned = bool(bot) and any(m[1] == bot for m in _MENTION.finditer(text))
    text = _MENTION.sub(lambda m: "" if m[1] == bot else m[0], text)
    return html.unescape(text).strip(), mentioned


def _message(raw: Mapping[str, Any]) -> Message | None:
    event = raw.get("event")
    if not isinstance(event, Mapping) or event.get("type") != "message":
        return None  # app_mention too: its message comes as a `message` event
    # Edits, deletions, joins, bots' posts (this app's too) are not a user talking.
    if event.get("bot_id") or event.get("subtype") not in (None, "file_share"):
        return None
    user, channel = event.get("user"), event.get("channel")
    update, bot = raw.get("event_id"), _bot_user(raw)
    if not (isinstance(user, str) and isinstance(channel, str) and isinstance(update, str)):
        return None
    if user == bot:
        return None
    text, mentioned = _text(str(event.get("text") or ""), bot)
    thread = event.get("thread_ts")
    followup = event.get("channel_type") != "im" and not mentioned
    if followup and not isinstance(thread, str):
        return None  # in a channel the app answers only when it is mentioned
    files = event.get("files")
    attachments = (
        tuple(_file(f) for f in files if isinstance(f, Mapping)) if isinstance(files, list) else ()
    )
    if not text and not attachments:
        return None
    key = ChatKey(
        platform=NAME,
        chat=channel,
        thread=thread if isinstance(thread, str) else "",
        user=user,
    )
    return Message(id=update, key=key, text=text, attachments=attachments, followup=followup)


def _file(f: Mapping[str, Any]) -> Attachment:
    """A shared file as an attachment: an image when Slack's mimetype says so."""
    media_type, given = str(f.get("mimetype") or ""), f.get("size")
    return Attachment(
        kind="image" if media_type.startswith("image/") else "file",
        name=str(f.get("name") or f.get("title") or "file"),
        media_type=media_type,
        size=given if isinstance(given, int) and given > 0 else 0,
        ref=str(f.get("url_private_download") or ""),
    )


def _press(raw: Mapping[str, Any]) -> ButtonPress | None:
    user, channel, message = raw.get("user"), raw.get("channel"), raw.get("message")
    actions = raw.get("actions")
    if not (isinstance(user, Mapping) and isinstance(channel, Mapping)):
        return None
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], Mapping):
        return None
    token, _, index = str(actions[0].get("value") or "").rpartition(":")
    if not token or not index.isdigit():
        return None
    thread = message.get("thread_ts") if isinstance(message, Mapping) else None
    key = ChatKey(
        platform=NAME,
        chat=str(channel.get("id")),
        thread=thread if isinstance(thread, str) else "",
        user=str(user.get("id")),
    )
    press_id = str(raw.get("trigger_id") or actions[0].get("action_ts") or "")
    return ButtonPress(id=press_id, key=key, question=token, choice=int(index))


def _command(raw: Mapping[str, Any]) -> Message | None:
    """A slash command: `/new` as the gateway's /new, `/stoker usage` as its /usage."""
    command, text = str(raw.get("command") or ""), str(raw.get("text") or "").strip()
    user, channel, trigger = raw.get("user_id"), raw.get("channel_id"), raw.get("trigger_id")
    if not (command.startswith("/") and user and channel and trigger):
        return None
    if command == "/stoker":
        word, _, rest = text.partition(" ")
        command, text = "/" + (word or "help"), rest
    key = ChatKey(platform=NAME, chat=str(channel), user=str(user))
    return Message(id=str(trigger), key=key, text=f"{command} {text}".strip())
