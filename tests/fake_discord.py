"""A fake Discord on loopback: the REST routes the Discord adapter calls, under
`/api/v10`, and the gateway websocket at `/gateway`, speaking Discord's protocol (HELLO,
IDENTIFY, heartbeats and their ACKs, READY, dispatches; zlib-stream compressed when the
client asks for it, as discord.py does).

The test drives it: a user writes (`user_message`: stored in the channel's history and,
when a bot is connected, dispatched as MESSAGE_CREATE), presses a button
(`press`: INTERACTION_CREATE). Everything the bot calls is recorded (`calls`). With no
bot connected a message lands in the history and in the gateway session's backlog, as
on Discord: a bot that resumes its session gets it then; one that identifies anew (a
restart) reads it back through REST.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import threading
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fake_platform import HeldFiles, RecordedCalls

BOT_ID = 1100000000000000001
APP_ID = 1100000000000000002
USER = 1100000000000000003  # the test user
DM = 1100000000000000004  # their direct-message channel with the bot
GUILD = 1100000000000000005
CHANNEL = 1100000000000000006  # a server channel


def _user(uid: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(uid),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
    }


class FakeDiscord(RecordedCalls):
    SEND = "create_message"
    TEXT = "content"

    def __init__(self, *, token: str) -> None:
        self.token = token
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1300000000000000000, 4194304)  # snowflakes, in time order
        self.channels: dict[int, dict[str, Any]] = {
            DM: {"id": str(DM), "type": 1},
            CHANNEL: {"id": str(CHANNEL), "type": 0, "guild_id": str(GUILD)},
        }
        self.history: dict[int, list[dict[str, Any]]] = {DM: [], CHANNEL: []}
        self.asked: list[dict[str, Any]] = []  # the bot's messages with buttons, as posted
        self.identified: list[dict[str, Any]] = []  # IDENTIFY payloads, token taken out
        # call name -> how many to fail with a 503 (discord.py itself retries a 500)
        self.fail_next: dict[str, int] = {}
        self.expired = False  # every interaction is past answering (404 Unknown interaction)
        self.resumed = 0  # sessions resumed
        self.commands: list[dict[str, Any]] = []  # the application's slash commands
        self._tokens: dict[str, int] = {}  # interaction token -> its channel
        self.files = HeldFiles()  # what users attached, served as the CDN
        # The gateway session (the server loop's alone): its id, sequence, what it sent.
        self._session = ""
        self._seq = 0
        self._backlog: list[dict[str, Any]] = []
        self._socket: _Socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.url = ""  # set by the test once served (the gateway URL REST hands out)

    # -- the test's side ---------------------------------------------------------------------

    def user_message(
        self,
        text: str,
        *,
        user: int = USER,
        channel: int = DM,
        mention: bool = False,
        reply_to: dict[str, Any] | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A user writes; `mention` puts the bot's mention in front, as Discord does;
        `reply_to` makes it a reply to that message, pinging its author (Discord's
        default: the author is among the mentions, not in the text); `files` are
        attachments made by `file`."""
        content = f"<@{BOT_ID}> {text}" if mention else text
        pinged = [reply_to["author"]] if reply_to else []
        reply = (
            {
                "type": 19,  # REPLY
                "message_reference": {"message_id": reply_to["id"], "channel_id": str(channel)},
                "referenced_message": reply_to,
            }
            if reply_to is not None
            else {}
        )
        message = self._message(
            channel,
            _user(user, f"user{user % 1000}"),
            content,
            mentions=[_user(BOT_ID, "stoker", bot=True)] if mention else pinged,
            attachments=files or [],
            **reply,
        )
        self._dispatch("MESSAGE_CREATE", self._in_guild(message, user))
        return message

    def file(
        self,
        name: str,
        content_type: str,
        data: bytes,
        *,
        stated: int | None = None,
        endless: bool = False,
        url: str = "",
    ) -> dict[str, Any]:
        """An attachment a user sends (for `user_message(files=...)`), held to be served
        as the CDN does (`stated`: the size Discord says, when not the real one;
        `endless`: a download that never ends; `url`: a link elsewhere)."""
        file_id = self.files.keep(data, endless=endless)
        link = url or f"{self.url}/attachments/{CHANNEL}/{file_id}/{name}?ex=67a1&is=67a0&hm=ab"
        return {
            "id": str(next(self._ids)),
            "filename": name,
            "size": len(data) if stated is None else stated,
            "url": link,
            "proxy_url": link,
            "content_type": content_type,
        }

    def press(self, sent: dict[str, Any], button: int, *, user: int = USER) -> dict[str, Any]:
        """A user presses the `button`-th button of a message the bot sent."""
        channel = int(sent["channel_id"])
        row = sent["components"][0]["components"]
        interaction = self._interaction(
            channel,
            user,
            type=3,
            data={"custom_id": row[button]["custom_id"], "component_type": 2},
            message=sent,
        )
        self._dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def slash(self, name: str, *values: str, user: int = USER, channel: int = DM) -> dict[str, Any]:
        """A user runs one of the bot's slash commands (`values`: its options, in order)."""
        registered = {c["name"]: c for c in self.commands}
        if name not in registered:
            raise AssertionError(f"/{name} is not registered; the bot registered {registered}")
        options = [
            {"name": o["name"], "type": o["type"], "value": v}
            for o, v in zip(registered[name].get("options", []), values, strict=True)
        ]
        interaction = self._interaction(
            channel,
            user,
            type=2,
            data={"id": str(next(self._ids)), "name": name, "type": 1, "options": options},
        )
        self._dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def drop_connection(self) -> None:
        """The gateway closes the bot's connection (Discord does, now and then)."""
        socket, loop = self._socket, self._loop
        if socket is not None and loop is not None:
            asyncio.run_coroutine_threadsafe(socket.ws.close(code=4000), loop).result(5)

    def _interaction(self, channel: int, user: int, **fields: Any) -> dict[str, Any]:
        interaction: dict[str, Any] = {
            "id": str(next(self._ids)),
            "application_id": str(APP_ID),
            "token": "interaction-" + secrets.token_hex(8),
            "version": 1,
            "channel_id": str(channel),
            "channel": self.channels[channel],  # discord.py reads the id from here
            "locale": "en-US",
            "app_permissions": "0",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "attachment_size_limit": 10 * 1024 * 1024,
            **fields,
        }
        self._tokens[interaction["token"]] = channel
        who = _user(user, f"user{user % 1000}")
        guild = self.channels[channel].get("guild_id")
        if guild:
            return interaction | {"guild_id": guild, "member": _member(who), "context": 0}
        return interaction | {"user": who, "context": 1}

    @property
    def connected(self) -> bool:
        return self._socket is not None

    # -- the bot's side: REST ----------------------------------------------------------------

    def _record(self, name: str, params: dict[str, Any]) -> Response | None:
        with self._lock:
            self.calls.append((name, params))
            if self.fail_next.get(name, 0) > 0:
                self.fail_next[name] -= 1
                return JSONResponse({"message": "Service Unavailable", "code": 0}, 503)
        return None

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {self.token}"

    def _rest(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """A REST route: the bot's token checked (not on an interaction's callback and
        follow-ups, which carry its own token in the URL), the handler's result as JSON."""

        async def endpoint(request: Request) -> Response:
            interaction = handler in (self.callback, self.followup)
            if not interaction and not self._authorized(request):
                return JSONResponse({"message": "401: Unauthorized", "code": 0}, 401)
            result = await handler(request)
            return result if isinstance(result, Response) else JSONResponse(result)

        return endpoint

    async def me(self, request: Request) -> Any:
        return self._record("get_me", {}) or _user(BOT_ID, "stoker", bot=True)

    async def application(self, request: Request) -> Any:
        return self._record("get_application", {}) or {
            "id": str(APP_ID),
            "name": "stoker",
            "description": "",
            "icon": None,
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": _user(USER, "owner"),
            "verify_key": "0" * 64,
            "flags": 0,
        }

    async def gateway_bot(self, request: Request) -> Any:
        return self._record("get_gateway_bot", {}) or {
            "url": self.url.replace("http://", "ws://") + "/gateway",
            "shards": 1,
            "session_start_limit": {
                "total": 1000,
                "remaining": 999,
                "reset_after": 0,
                "max_concurrency": 1,
            },
        }

    async def channel(self, request: Request) -> Any:
        cid = int(request.path_params["cid"])
        failed = self._record("get_channel", {"channel_id": cid})
        if failed:
            return failed
        if cid not in self.channels:
            return JSONResponse({"message": "Unknown Channel", "code": 10003}, 404)
        return self.channels[cid]

    async def messages(self, request: Request) -> Any:
        cid = int(request.path_params["cid"])
        if request.method == "GET":
            after = int(request.query_params.get("after", "0"))
            limit = int(request.query_params.get("limit", "50"))
            failed = self._record("get_messages", {"channel_id": cid, "after": after})
            if failed:
                return failed
            with self._lock:
                newer = [m for m in self.history.get(cid, []) if int(m["id"]) > after]
            return list(reversed(newer[:limit]))  # Discord: the oldest after `after`, newest first
        body = await request.json()
        failed = self._record("create_message", {"channel_id": cid, **body})
        if failed:
            return failed
        message = self._message(
            cid,
            _user(BOT_ID, "stoker", bot=True),
            body.get("content", ""),
            components=body.get("components", []),
            flags=body.get("flags", 0),
        )
        if message["components"]:
            with self._lock:
                self.asked.append(dict(message))
        return message

    async def message(self, request: Request) -> Any:
        cid, mid = int(request.path_params["cid"]), int(request.path_params["mid"])
        body = await request.json()
        failed = self._record("edit_message", {"channel_id": cid, "message_id": mid, **body})
        if failed:
            return failed
        with self._lock:
            for m in self.history.get(cid, []):
                if int(m["id"]) == mid:
                    m.update(body, edited_timestamp=_now())
                    return dict(m)
        return JSONResponse({"message": "Unknown Message", "code": 10008}, 404)

    async def typing(self, request: Request) -> Any:
        cid = int(request.path_params["cid"])
        return self._record("typing", {"channel_id": cid}) or Response(status_code=204)

    async def callback(self, request: Request) -> Any:
        body = await request.json()
        iid = request.path_params["iid"]
        if self.expired:
            return JSONResponse({"message": "Unknown interaction", "code": 10062}, 404)
        failed = self._record(
            "interaction_callback",
            {"interaction_id": iid, "token": request.path_params["tok"], **body},
        )
        if failed:
            return failed
        data = body.get("data") or {}
        ephemeral = bool(int(data.get("flags", 0)) & 64)
        return {
            "interaction": {
                "id": iid,
                "type": 3,
                "response_message_ephemeral": ephemeral,
            },
            "resource": None,
        }

    async def download(self, request: Request) -> Response:
        """The CDN: an attachment's bytes to anyone with its signed link (no token)."""
        file_id = request.path_params["file"]
        with self._lock:
            self.calls.append(
                ("download", {"file": file_id, "token": "authorization" in request.headers})
            )
        return self.files.response(file_id)

    async def set_commands(self, request: Request) -> Any:
        body = await request.json()
        failed = self._record("set_commands", {"application_id": request.path_params["app"]})
        if failed:
            return failed
        self.commands = [{**c, "id": str(next(self._ids))} for c in body]
        return self.commands

    async def followup(self, request: Request) -> Any:
        body = await request.json()
        channel = self._tokens[request.path_params["tok"]]
        failed = self._record("followup", {"channel_id": channel, **body})
        if failed:
            return failed
        return self._message(
            channel,
            _user(BOT_ID, "stoker", bot=True),
            body.get("content", ""),
            flags=body.get("flags", 0),
        )

    def _message(
        self,
        channel: int,
        author: dict[str, Any],
        content: str,
        *,
        mentions: list[dict[str, Any]] | None = None,
        attachments: list[dict[str, Any]] | None = None,
        components: list[dict[str, Any]] | None = None,
        flags: int = 0,
        **fields: Any,
    ) -> dict[str, Any]:
        message = {
            "id": str(next(self._ids)),
            "channel_id": str(channel),
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions or [],
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": flags,
            "components": components or [],
            **fields,
        }
        with self._lock:
            self.history.setdefault(channel, []).append(message)
        return dict(message)

    def _in_guild(self, message: dict[str, Any], user: int) -> dict[str, Any]:
        """A gateway MESSAGE_CREATE carries its server and the author as a member there."""
        guild = self.channels[int(message["channel_id"])].get("guild_id")
        if not guild:
            return message
        return {**message, "guild_id": guild, "member": _member(None)}

    # -- the bot's side: the gateway ---------------------------------------------------------

    def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._emit(event, data), loop).result(5)

    async def _emit(self, event: str, data: dict[str, Any]) -> None:
        """Into the session, kept for a resume, and out on its connection if one is up;
        with no session (no bot ever identified, or a new one) the event is lost."""
        if not self._session:
            return
        self._seq += 1
        payload = {"op": 0, "t": event, "s": self._seq, "d": data}
        self._backlog.append(payload)
        if self._socket is not None:
            await self._socket.send(payload)

    async def gateway(self, ws: WebSocket) -> None:
        await ws.accept()
        socket = _Socket(ws, zlib_stream=ws.query_params.get("compress") == "zlib-stream")
        self._loop = asyncio.get_running_loop()
        await socket.send({"op": 10, "d": {"heartbeat_interval": 41250}})
        try:
            while True:
                frame = await ws.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                payload = json.loads(frame.get("text") or frame.get("bytes") or b"{}")
                op = payload.get("op")
                if op == 1:
                    await socket.send({"op": 11})
                elif op == 2:
                    await self._identify(socket, payload["d"])
                elif op == 6:
                    await self._resume(socket, payload["d"])
        except WebSocketDisconnect:
            pass
        finally:
            if self._socket is socket:
                self._socket = None

    async def _identify(self, socket: _Socket, d: dict[str, Any]) -> None:
        if d.get("token") != self.token:
            await socket.ws.close(code=4004)  # Authentication failed
            return
        with self._lock:
            self.identified.append({k: v for k, v in d.items() if k != "token"})
        self._session, self._seq, self._backlog = secrets.token_hex(8), 0, []
        self._socket = socket
        await self._emit(
            "READY",
            {
                "v": 10,
                "user": _user(BOT_ID, "stoker", bot=True),
                "guilds": [],
                "session_id": self._session,
                "resume_gateway_url": self.url.replace("http://", "ws://") + "/gateway",
                "shard": d.get("shard", [0, 1]),
                "application": {"id": str(APP_ID), "flags": 0},
            },
        )

    async def _resume(self, socket: _Socket, d: dict[str, Any]) -> None:
        """What the session dispatched after the client's last sequence, then RESUMED."""
        if d.get("token") != self.token or d.get("session_id") != self._session:
            await socket.send({"op": 9, "d": False})  # invalid session: identify anew
            return
        self.resumed += 1
        self._socket = socket
        for payload in [p for p in self._backlog if p["s"] > int(d.get("seq") or 0)]:
            await socket.send(payload)
        await self._emit("RESUMED", {})

    def app(self) -> Starlette:
        rest = [
            Route("/users/@me", self._rest(self.me)),
            Route("/oauth2/applications/@me", self._rest(self.application)),
            Route("/gateway/bot", self._rest(self.gateway_bot)),
            Route("/channels/{cid}", self._rest(self.channel)),
            Route("/channels/{cid}/messages", self._rest(self.messages), methods=["GET", "POST"]),
            Route("/channels/{cid}/messages/{mid}", self._rest(self.message), methods=["PATCH"]),
            Route("/channels/{cid}/typing", self._rest(self.typing), methods=["POST"]),
            Route(
                "/interactions/{iid}/{tok}/callback", self._rest(self.callback), methods=["POST"]
            ),
            Route("/applications/{app}/commands", self._rest(self.set_commands), methods=["PUT"]),
            Route("/webhooks/{app}/{tok}", self._rest(self.followup), methods=["POST"]),
        ]
        return Starlette(
            routes=[
                Mount("/api/v10", routes=rest),
                WebSocketRoute("/gateway", self.gateway),
                Route("/attachments/{channel}/{file}/{name}", self.download),
            ]
        )


class _Socket:
    """One gateway connection and, when the client asked for it, its zlib stream."""

    def __init__(self, ws: WebSocket, *, zlib_stream: bool) -> None:
        self.ws = ws
        self._zlib = zlib.compressobj() if zlib_stream else None
        self._send = asyncio.Lock()

    async def send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        async with self._send:
            if self._zlib is None:
                await self.ws.send_text(data.decode())
            else:
                await self.ws.send_bytes(
                    self._zlib.compress(data) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
                )


def _member(user: dict[str, Any] | None) -> dict[str, Any]:
    member: dict[str, Any] = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False}
    return member if user is None else {**member, "user": user}


def _now() -> str:
    return datetime.now(UTC).isoformat()
