"""Telegram, through python-telegram-bot (the `telegram` extra).

The library's `Bot` makes every Bot API call; the receiving loop is ours, because the
offset that acknowledges updates to Telegram must move only after each update is durably
accepted (PTB's own updater confirms what it fetched before handlers run). Long polling
calls getUpdates with the offset of the last accepted update plus one; a webhook route
checks Telegram's secret-token header, accepts the update, and only then answers 200
(a 5xx makes Telegram deliver it again).

Replies use Telegram's HTML parse mode (`markup.telegram_html`), at most 4096 UTF-16
units each; one that Telegram still cannot parse is sent again as plain text.

What an update means is `updates`' to read. `fetch` asks getFile for the file's path,
then streams it from the file URL (which holds the token: it is never logged, and the
redaction filter masks it in the HTTP log).
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
import logging
import re
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram import Message as TgMessage
from telegram.constants import ChatAction, MessageLimit, ParseMode
from telegram.error import BadRequest, InvalidToken, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from stoker.config import DEFAULT_LIMITS
from stoker.errors import ConfigError
from stoker.platforms.base import (
    Attachment,
    AttachmentRefused,
    ButtonPress,
    ChatRef,
    Context,
    Inbox,
    MessageRef,
    started,
)
from stoker.platforms.base import Update as PlatformUpdate
from stoker.platforms.download import read_within, too_large
from stoker.platforms.redact import Redacting
from stoker.platforms.telegram.markup import telegram_html
from stoker.platforms.telegram.settings import TelegramSettings
from stoker.platforms.telegram.updates import NAME, parse
from stoker.platforms.text import render, utf16_length

log = logging.getLogger(__name__)
T = TypeVar("T")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
ALLOWED_UPDATES = ("message", "callback_query")
MAX_WEBHOOK_BODY = DEFAULT_LIMITS.max_body_bytes  # an update is a few kilobytes
# Loggers that may print an API URL or an error holding the token.
LOGGERS = (
    "httpx",
    "telegram",
    "telegram.Bot",
    "telegram.BaseRequest",
    "telegram.HTTPXRequest",
    __name__,
    "stoker.platforms.bridge",
)
FORMATTING = (
    "You are chatting with the user in Telegram, where replies are read on a phone. Keep "
    "them short. Formatting that shows: **bold**, *italic*, `inline code`, fenced code "
    "blocks with ``` and [links](https://...). Tables and nested lists do not render; use "
    "short lines or simple '-' lists instead."
)
FLOOD_TRIES = 4  # a message Telegram asks to wait for is tried this often
DOWNLOAD_TIMEOUT = 60.0  # seconds for one file (Telegram serves bots files up to 20 MB)


def _pause(exc: RetryAfter) -> float:
    """Seconds Telegram asks to wait. PTB 22 warns on reading `retry_after` (an int now,
    a timedelta later); either is fine here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


async def _patiently(call: Callable[[], Awaitable[T]]) -> T:
    """`call`, waiting as long as Telegram's flood control asks (429 retry_after) and
    trying again: a long reply's later parts are not lost, nor its earlier ones resent."""
    for attempt in range(1, FLOOD_TRIES + 1):
        try:
            return await call()
        except RetryAfter as exc:
            if attempt == FLOOD_TRIES:
                raise
            await asyncio.sleep(_pause(exc))
    raise AssertionError("unreachable")


def _plain(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


class TelegramAdapter:
    """The Telegram Bot API, as `base.Adapter`."""

    name = NAME
    limit = int(MessageLimit.MAX_TEXT_LENGTH)
    formatting = FORMATTING

    def __init__(self, settings: TelegramSettings, *, retry_pause: float = 1.0) -> None:
        self.settings = settings
        self.retry_pause = retry_pause
        self._redact = Redacting(LOGGERS, settings.token)
        self._bot: Bot | None = None
        self._files: httpx.AsyncClient | None = None
        self._poller: asyncio.Task[None] | None = None
        self._username = ""

    @property
    def bot(self) -> Bot:
        return started(self._bot, "Telegram")

    # -- receiving ---------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._redact.install()  # before the Bot exists: it logs its URL when made
        api = self.settings.api_url
        self._bot = Bot(self.settings.token, base_url=f"{api}/bot", base_file_url=f"{api}/file/bot")
        try:
            await self._bot.initialize()  # getMe: a wrong token fails the start, clearly
        except InvalidToken:
            # PTB's message quotes the token: say what happened without it.
            await self.stop()
            raise ConfigError(
                "platforms.telegram: Telegram rejected the bot token (getMe: Unauthorized); "
                "check the token that token_env or token_file gives"
            ) from None
        self._username = self._bot.username or ""
        self._files = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT)
        if self.settings.mode == "webhook":
            await self._bot.set_webhook(
                self.settings.webhook_url or "",
                secret_token=self.settings.webhook_secret,
                allowed_updates=list(ALLOWED_UPDATES),
            )
        else:
            await self._bot.delete_webhook()  # Telegram refuses getUpdates while one is set
            self._poller = asyncio.create_task(self._poll(inbox))

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        if self._files is not None:
            await self._files.aclose()
            self._files = None
        if self._bot is not None:
            await self._bot.shutdown()
            self._bot = None
        self._redact.remove()

    async def _poll(self, inbox: Inbox) -> None:
        """Long polling. The offset sent with each getUpdates acknowledges every update
        before it, so it moves past an update only once `inbox.accept` stored it."""
        offset: int | None = None
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=offset,
                    timeout=self.settings.poll_timeout,
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except RetryAfter as exc:
                await asyncio.sleep(_pause(exc))
                continue
            except TelegramError as exc:
                log.warning("telegram: getUpdates failed: %s", exc)
                await asyncio.sleep(self.retry_pause)
                continue
            for update in updates:
                try:
                    await inbox.accept(update.to_dict())
                except Exception as exc:
                    # Not stored: leave the offset before it, so Telegram sends it again.
                    log.warning("telegram: update %d not accepted: %r", update.update_id, exc)
                    await asyncio.sleep(self.retry_pause)
                    break
                offset = update.update_id + 1

    def routes(self, inbox: Inbox) -> Sequence[BaseRoute]:
        if self.settings.mode != "webhook":
            return ()
        secret = (self.settings.webhook_secret or "").encode()

        async def webhook(request: Request) -> Response:
            given = request.headers.get(SECRET_HEADER, "").encode()
            if not secret or not hmac.compare_digest(given, secret):
                return Response(status_code=403)
            body = await request.body()
            if len(body) > MAX_WEBHOOK_BODY:
                return Response(status_code=413)
            try:
                raw = json.loads(body)
            except ValueError:
                return Response(status_code=400)
            if not isinstance(raw, dict) or not isinstance(raw.get("update_id"), int):
                return Response(status_code=400)
            await inbox.accept(raw)  # raises (a 500) when not stored: Telegram retries
            return Response(status_code=200)

        return (Route(self.settings.webhook_path, webhook, methods=["POST"]),)

    def parse(self, raw: Mapping[str, Any]) -> PlatformUpdate | None:
        return parse(raw, bot=self._bot, username=self._username)

    # -- sending -----------------------------------------------------------------------------

    def render(self, text: str) -> list[str]:
        return render(text, self.limit, telegram_html, measure=utf16_length)

    async def send(
        self, ctx: Context, chat: ChatRef, text: str, *, markup: bool = True, quiet: bool = False
    ) -> MessageRef:
        thread = int(chat.thread) if chat.thread else None

        def post(body: str, mode: str | None) -> Callable[[], Awaitable[TgMessage]]:
            return lambda: self.bot.send_message(
                int(chat.chat),
                body,
                parse_mode=mode,
                message_thread_id=thread,
                disable_notification=quiet,
            )

        try:
            sent = await _patiently(post(text, ParseMode.HTML if markup else None))
        except BadRequest as exc:
            if not markup or "parse" not in str(exc).lower():
                raise
            log.info("telegram: HTML refused (%s), sent as plain text", exc)
            sent = await _patiently(post(_plain(text), None))
        return MessageRef(chat=chat.chat, id=str(sent.message_id))

    async def edit(self, ctx: Context, message: MessageRef, text: str) -> None:
        try:
            await _patiently(
                lambda: self.bot.edit_message_text(
                    text, chat_id=int(message.chat), message_id=int(message.id)
                )
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise

    async def typing(self, ctx: Context, chat: ChatRef) -> None:
        await self.bot.send_chat_action(
            int(chat.chat),
            ChatAction.TYPING,
            message_thread_id=int(chat.thread) if chat.thread else None,
        )

    async def ask(
        self, ctx: Context, chat: ChatRef, question: str, choices: Sequence[str], token: str
    ) -> MessageRef:
        keyboard = InlineKeyboardMarkup(
            [[InlineKeyboardButton(c, callback_data=f"{token}:{i}") for i, c in enumerate(choices)]]
        )
        sent = await _patiently(
            lambda: self.bot.send_message(
                int(chat.chat),
                question,
                reply_markup=keyboard,
                message_thread_id=int(chat.thread) if chat.thread else None,
            )
        )
        return MessageRef(chat=chat.chat, id=str(sent.message_id))

    async def pressed(self, ctx: Context, press: ButtonPress, note: str) -> None:
        await self.bot.answer_callback_query(press.id, text=note[:200])

    async def fetch(self, ctx: Context, attachment: Attachment, limit: int) -> bytes:
        try:
            file = await _patiently(lambda: self.bot.get_file(attachment.ref))
        except BadRequest as exc:  # over Telegram's 20 MB for bots, or an id it does not know
            raise AttachmentRefused(f"Telegram would not give it ({exc.message})") from None
        if not file.file_path or self._files is None:
            raise AttachmentRefused("Telegram gave no file path for it")
        if file.file_size and file.file_size > limit:
            raise too_large(file.file_size, limit)
        # PTB made the path a URL under base_file_url: it holds the token.
        async with self._files.stream("GET", file.file_path) as response:
            if response.status_code >= 500:
                raise ConnectionError(f"Telegram's file server answered {response.status_code}")
            if response.status_code != 200:
                raise AttachmentRefused(f"Telegram refused it ({response.status_code})")
            stated = response.headers.get("content-length")
            return await read_within(
                response.aiter_bytes(),
                limit,
                stated=int(stated) if stated and stated.isdigit() else None,
            )
