"""The platform seam: what the gateway needs of one chat platform, and the values it
trades in.

One adapter per platform (`telegram.py`, `slack.py`, `discord.py`) implements
`Adapter`: turn a raw update into an `Update`, send a reply, edit it, show typing, ask a
question with buttons, and download what a message carried (`fetch`). What is done with
an attachment (passed to the model, or refused with a reason) is the bridge's
(`attachments.py`). Everything else (allowlist, rate limit, deduplication, sessions,
turns, splitting) is the bridge's (`bridge.py`), the same for every platform. How a
platform delivers updates (long polling, a webhook, a socket) is the adapter's own:
`start` hands each raw update to the `Inbox`, which returns once the update is durably
accepted; only then may the adapter acknowledge it to the platform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from starlette.routing import BaseRoute

from stoker.errors import StokerError


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatKey:
    """Where a conversation lives: one session per platform, chat, thread and user.

    `thread` is a Telegram forum topic or a Slack thread ("" for none; a Discord thread
    is a channel of its own). `space` is what the chat is part of, for allowing all of it
    at once (a Discord server), and no part of the session's key.
    """

    platform: str
    chat: str
    thread: str = ""
    user: str
    space: str = ""

    @property
    def stored(self) -> str:
        """The key the store maps to a session."""
        return f"{self.chat}/{self.thread}/{self.user}"

    @property
    def gateway_user(self) -> str:
        """The gateway user the platform's user is: sessions are owned per platform user."""
        return f"{self.platform}:{self.user}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRef:
    """Where to post: a chat and, within it, a thread."""

    chat: str
    thread: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRef:
    """A message the bot posted, to edit later."""

    chat: str
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """Something a message carried besides its text, as the platform describes it; the
    bytes come from `Adapter.fetch`, only when they are wanted.

    `kind` is "image" for a picture a model may look at (a photo, an image sent as a
    file) and "file" for everything else, voice notes, videos and stickers included: a
    model never takes those, but the user is told so. `media_type` is the platform's
    word for it ("" when it gave none); `size` is in bytes, 0 when unknown. `ref` is the
    adapter's own handle to download it (a Telegram file_id, a Slack download URL).
    """

    kind: Literal["image", "file"]
    name: str
    media_type: str
    size: int
    ref: str


class AttachmentRefused(StokerError):
    """The platform will not give an attachment (over the limit, gone, not allowed), and
    asking again would get the same answer. The message says why, for the user."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A user's message: text, and what it carried besides (photos, files)."""

    id: str  # the deduplication key (Telegram update_id, Slack event_id, Discord message id)
    key: ChatKey
    text: str
    attachments: tuple[Attachment, ...] = ()
    # Not addressed to the bot (no mention) but in a thread: answered only when the user
    # already talks with the bot there (their chat key has a session), else dropped.
    followup: bool = False
    # Messages sent together as one (a Telegram album: one message per photo) share a
    # group: the bridge answers them in one turn.
    group: str = ""
    kind: Literal["message"] = "message"


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonPress:
    """A user pressed a button of a question (`Adapter.ask`)."""

    id: str  # the platform's id for the press, to acknowledge it
    key: ChatKey
    question: str  # the token the question was asked with
    choice: int  # the index of the button
    kind: Literal["button"] = "button"


Update = Message | ButtonPress


def read_by_type(
    raw: Mapping[str, Any], readers: Mapping[str, Callable[[Mapping[str, Any]], Update | None]]
) -> Update | None:
    """`raw` read by the reader of its "type" (None for a type no reader takes): how an
    adapter whose stored updates say what they are parses them."""
    read = readers.get(str(raw.get("type")))
    return read(raw) if read is not None else None


T = TypeVar("T")


def started(client: T | None, platform: str) -> T:
    """An adapter's platform client, which exists only between `start` and `stop`."""
    if client is None:
        raise RuntimeError(f"the {platform} adapter is not started")
    return client


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What a call to the platform is for (the update being answered, "" otherwise):
    adapters may use it to reply in place or correlate their logs."""

    update: str = ""


class Inbox(Protocol):
    """Where an adapter hands every raw update it receives."""

    async def accept(self, raw: Mapping[str, Any]) -> None:
        """Returns once the update is durably accepted (or deliberately dropped): the
        adapter may acknowledge it to the platform then, and not before. Raises when it
        could not be stored: the platform must deliver it again."""
        ...

    async def latest(self) -> Mapping[str, str]:
        """For each chat (`ChatKey.chat`) of the platform lately active, the id of the
        newest update accepted from it: where an adapter whose platform does not deliver
        again what came while the gateway was down (Discord) catches up from."""
        ...


class Adapter(Protocol):
    """One chat platform. `limit` is a message's most in the platform's `measure`."""

    @property
    def name(self) -> str: ...
    @property
    def limit(self) -> int: ...
    @property
    def formatting(self) -> str:
        """Formatting rules for the system prompt, frozen into each session it creates."""
        ...

    def render(self, text: str) -> list[str]:
        """A reply in the platform's markup, in messages within its limit."""
        ...

    def parse(self, raw: Mapping[str, Any]) -> Update | None:
        """The update as the bridge sees it; None for kinds it does not handle."""
        ...

    async def send(
        self, ctx: Context, chat: ChatRef, text: str, *, markup: bool = True, quiet: bool = False
    ) -> MessageRef:
        """Post one message (`markup`: `text` is `render`'s output, else plain text)."""
        ...

    async def edit(self, ctx: Context, message: MessageRef, text: str) -> None:
        """Replace a posted message's plain text (and drop its buttons)."""
        ...

    async def typing(self, ctx: Context, chat: ChatRef) -> None:
        """Show that the bot is working (the platform shows it for a few seconds)."""
        ...

    async def ask(
        self, ctx: Context, chat: ChatRef, question: str, choices: Sequence[str], token: str
    ) -> MessageRef:
        """Post `question` with one button per choice; a press comes back as a
        `ButtonPress` carrying `token` and the choice's index."""
        ...

    async def pressed(self, ctx: Context, press: ButtonPress, note: str) -> None:
        """Acknowledge a button press (`note`: a short confirmation the user sees)."""
        ...

    async def fetch(self, ctx: Context, attachment: Attachment, limit: int) -> bytes:
        """Download `attachment`, streamed: past `limit` bytes it stops reading and raises
        `AttachmentRefused` (so does a refusal that a retry would not change). Any other
        error is taken as passing (a network blip): the update is tried again later."""
        ...

    async def start(self, inbox: Inbox) -> None:
        """Begin receiving (a polling task, a webhook registration, a socket)."""
        ...

    async def stop(self) -> None: ...

    def routes(self, inbox: Inbox) -> Sequence[BaseRoute]:
        """HTTP routes the gateway serves for this platform (webhooks); may be none."""
        ...
