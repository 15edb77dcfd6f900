"""A local fake of the Telegram Bot API, served on 127.0.0.1 for the real library.

It implements what the gateway's adapter calls (getMe, getUpdates with long polling and
offset confirmation, sendMessage, editMessageText, sendChatAction, answerCallbackQuery,
setWebhook, deleteWebhook, getFile) the way Telegram does: form fields holding JSON
values, `{"ok": ..., "result": ...}` bodies, 401 for a wrong token, 400 for a message over
4096 UTF-16 units or for HTML it cannot parse, 400 "file is too big" from getFile past
20 MB. Files are served at `/file/bot<token>/<file_path>`, streamed in chunks, counting
what was sent. Tests queue user updates (texts, photos, documents, voice notes) and read
what the bot sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fake_platform import HeldFiles, RecordedCalls
from tests.images import png

BOT_ID = 777000111
BOT_USERNAME = "stoker_test_bot"
TEXT_FIELDS = frozenset({"text", "callback_query_id", "url", "secret_token", "parse_mode"})
_TAGS = frozenset({"b", "strong", "i", "em", "u", "s", "code", "pre", "a", "blockquote"})
MAX_BOT_FILE = 20_000_000  # getFile refuses bigger files


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.bad = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _TAGS:
            self.bad = self.bad or f"unsupported start tag {tag!r}"
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.bad = self.bad or f"unexpected end tag {tag!r}"


def _parse_error(text: str) -> str:
    parser = _Html()
    parser.feed(text)
    parser.close()
    if parser.stack:
        return parser.bad or f"unclosed tag {parser.stack[-1]!r}"
    return parser.bad


@dataclass
class FakeTelegram(RecordedCalls):
    SEND = "sendMessage"  # not a field: no annotation
    token: str
    url: str = ""  # where this fake is served
    updates: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    offsets: list[int | None] = field(default_factory=list)
    posted: list[dict[str, Any]] = field(default_factory=list)  # the bot's messages, as sent
    webhook: dict[str, Any] | None = None
    fail_next: dict[str, int] = field(default_factory=dict)  # method -> 500s to answer
    flood: set[int] = field(default_factory=set)  # sendMessage calls (1-based) answered 429
    broken: set[int] = field(default_factory=set)  # sendMessage calls (1-based) answered 500
    files: HeldFiles = field(default_factory=HeldFiles)
    stated: dict[str, int] = field(default_factory=dict)  # file_id -> the size getFile says
    # Set when the fake stops serving: a long poll still held ends then, not at its timeout
    # (the server waits for it, a second at the end of every test).
    closing: threading.Event = field(default_factory=threading.Event)
    _next_update: int = 1000
    _next_message: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- what the test does ----------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """The bot is receiving: it has asked for updates, or set its webhook."""
        return bool(self.offsets) or self.webhook is not None

    def user_message(
        self, text: str, *, user: int = 42, chat: int | None = None, thread: int | None = None
    ) -> dict[str, Any]:
        """Queue a message from `user` (in a private chat with them unless `chat`)."""
        chat_id = chat if chat is not None else user
        message: dict[str, Any] = {
            "message_id": self._message_id(),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id == user else "supergroup"},
            "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
            "text": text,
        }
        if thread is not None:
            message["message_thread_id"] = thread
            message["is_topic_message"] = True
        if text.startswith("/"):
            word = text.split()[0]
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(word)}]
        return self._queue({"message": message})

    def file(
        self, data: bytes, *, stated: int | None = None, endless: bool = False
    ) -> dict[str, Any]:
        """Keep `data` as a file Telegram holds; its id and size as messages carry them
        (`stated`: the size Telegram says, when it is not the real one; `endless`: the
        download never ends, zeros following the data)."""
        file_id = self.files.keep(data, endless=endless)
        size = len(data) if stated is None else stated
        with self._lock:
            self.stated[file_id] = size
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": size}

    def attached(
        self,
        carried: dict[str, Any],
        caption: str = "",
        *,
        user: int = 42,
        media_group_id: str = "",
    ) -> dict[str, Any]:
        """Queue a message of `user` carrying `carried` (e.g. {"voice": ...}) and `caption`."""
        if media_group_id:
            carried = {**carried, "media_group_id": media_group_id}
        message: dict[str, Any] = {
            "message_id": self._message_id(),
            "date": int(time.time()),
            "chat": {"id": user, "type": "private"},
            "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
            **carried,
        }
        if caption:
            message["caption"] = caption
        return self._queue({"message": message})

    def photo(
        self, caption: str = "", *, user: int = 42, sizes: tuple[tuple[int, int], ...] = ((90, 90),)
    ) -> dict[str, Any]:
        """A photo in the sizes Telegram makes of it (each a real PNG here), smallest first."""
        entries = [{**self.file(png(w, h)), "width": w, "height": h} for w, h in sizes]
        return self.attached({"photo": entries}, caption, user=user)

    def album(self, caption: str, count: int, *, user: int = 42) -> list[dict[str, Any]]:
        """An album of `count` photos: one update per photo sharing a `media_group_id`,
        the caption on the first, as Telegram delivers it."""
        group = f"1357{self._message_id()}"
        return [
            self.attached(
                {"photo": [{**self.file(png(40, 30, shade=i)), "width": 40, "height": 30}]},
                caption if i == 0 else "",
                user=user,
                media_group_id=group,
            )
            for i in range(count)
        ]

    def document(
        self,
        data: bytes,
        name: str,
        mime_type: str,
        caption: str = "",
        *,
        stated: int | None = None,
        endless: bool = False,
    ) -> dict[str, Any]:
        """A file sent as a document (an image too, when sent "as a file")."""
        entry = {
            **self.file(data, stated=stated, endless=endless),
            "file_name": name,
            "mime_type": mime_type,
        }
        return self.attached({"document": entry}, caption)

    def voice(self, caption: str = "") -> dict[str, Any]:
        entry = {**self.file(b"OggS" + bytes(2000)), "duration": 3, "mime_type": "audio/ogg"}
        return self.attached({"voice": entry}, caption)

    def press(self, sent: dict[str, Any], button: int, *, user: int = 42) -> dict[str, Any]:
        """Queue a press of button `button` of the bot's message `sent` (from `posted`)."""
        data = sent["reply_markup"]["inline_keyboard"][0][button]["callback_data"]
        return self._queue(
            {
                "callback_query": {
                    "id": f"cq{self._next_update}",
                    "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
                    "chat_instance": "ci",
                    "data": data,
                    "message": {
                        "message_id": sent["message_id"],
                        "date": int(time.time()),
                        "chat": sent["chat"],
                        "text": sent["text"],
                    },
                }
            }
        )

    def redeliver(self, update: dict[str, Any]) -> None:
        """Telegram sending an update again (it was not confirmed, or a webhook retry)."""
        with self._lock:
            self.updates.append(update)

    # -- the API -------------------------------------------------------------------------

    def _queue(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            update = {"update_id": self._next_update, **body}
            self._next_update += 1
            self.updates.append(update)
        return update

    def _message_id(self) -> int:
        with self._lock:
            self._next_message += 1
            return self._next_message

    def _bot_message(self, params: dict[str, Any], *, new: bool) -> dict[str, Any]:
        message = {
            "message_id": self._message_id(),
            "date": int(time.time()),
            "chat": {"id": int(params["chat_id"]), "type": "private"},
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Stoker"},
            "text": params.get("text", ""),
        }
        if new:  # an edit changes a posted message; it posts none
            with self._lock:
                self.posted.append({**message, "reply_markup": params.get("reply_markup")})
        return message

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = params.get("offset")
        self.offsets.append(offset)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while True:
            with self._lock:
                if offset is not None:  # confirms every update before it, as Telegram does
                    self.updates = [u for u in self.updates if u["update_id"] >= offset]
                ready = sorted(self.updates, key=lambda u: u["update_id"])[:100]
            if ready or time.monotonic() >= deadline or self.closing.is_set():
                return ready
            await asyncio.sleep(0.02)

    async def endpoint(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401
            )
        method = request.path_params["method"]
        form = await request.form()
        params: dict[str, Any] = {}
        for key, value in form.items():
            text = str(value)
            try:
                params[key] = text if key in TEXT_FIELDS else json.loads(text)
            except ValueError:
                params[key] = text
        with self._lock:
            self.calls.append((method, params))
            failures = self.fail_next.get(method, 0)
            if failures:
                self.fail_next[method] = failures - 1
            nth = sum(1 for name, _ in self.calls if name == method)
        if method == "sendMessage" and nth in self.flood:
            return JSONResponse(
                {
                    "ok": False,
                    "error_code": 429,
                    "description": "Too Many Requests: retry after 1",
                    "parameters": {"retry_after": 1},
                },
                status_code=429,
            )
        if failures or (method == "sendMessage" and nth in self.broken):
            return JSONResponse(
                {"ok": False, "error_code": 500, "description": "Internal Server Error"},
                status_code=500,
            )
        return self._answer(await self._result(method, params))

    def _answer(self, result: Any) -> Response:
        if isinstance(result, Response):
            return result
        return JSONResponse({"ok": True, "result": result})

    async def _result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            return {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Stoker",
                "username": BOT_USERNAME,
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        if method == "getUpdates":
            if self.webhook is not None:
                return _bad(409, "Conflict: can't use getUpdates method while webhook is active")
            return await self._get_updates(params)
        if method in ("sendMessage", "editMessageText"):
            text = str(params.get("text", ""))
            if len(text.encode("utf-16-le")) // 2 > 4096:
                return _bad(400, "Bad Request: message is too long")
            if not text.strip():
                return _bad(400, "Bad Request: message text is empty")
            if params.get("parse_mode") == "HTML" and (problem := _parse_error(text)):
                return _bad(400, f"Bad Request: can't parse entities: {problem}")
            return self._bot_message(params, new=method == "sendMessage")
        if method == "setWebhook":
            self.webhook = params
            return True
        if method == "deleteWebhook":
            self.webhook = None
            return True
        if method in ("sendChatAction", "answerCallbackQuery"):
            return True
        if method == "getFile":
            return self._get_file(str(params.get("file_id", "")))
        return _bad(404, "Not Found: method not found")

    def _get_file(self, file_id: str) -> Any:
        with self._lock:
            size = self.stated.get(file_id)
        if size is None:
            return _bad(400, "Bad Request: invalid file_id")
        if size > MAX_BOT_FILE:
            return _bad(400, "Bad Request: file is too big")
        path = f"documents/{file_id}.bin"
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": size,
            "file_path": path,
        }

    async def download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401
            )
        name = request.path_params["path"].rsplit("/", 1)[-1].removesuffix(".bin")
        with self._lock:
            self.calls.append(("download", {"file_id": name}))
        return self.files.response(name)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self.endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self.download, methods=["GET"]),
            ]
        )


def _bad(code: int, description: str) -> Response:
    return JSONResponse(
        {"ok": False, "error_code": code, "description": description}, status_code=code
    )
