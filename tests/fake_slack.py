"""A local fake of Slack, served on 127.0.0.1 for the real slack-sdk.

The Web API side implements what the gateway's adapter calls (auth.test,
chat.postMessage, chat.update, chat.postEphemeral, reactions.add, reactions.remove) the
way Slack does: a bearer token checked on every call, JSON or form bodies, HTTP 200
with `{"ok": false, "error": ...}` for a refused call, 429 with Retry-After when told
to limit (`limit_next`) (`invalid_auth`, `msg_too_long`
past 40,000 characters, `no_text`, `already_reacted`, `no_reaction`,
`message_not_found`). The other side is what Slack sends an app: event envelopes,
interactivity payloads and slash commands, signed with the app's signing secret
(`v0=` HMAC-SHA256 of `v0:TIMESTAMP:BODY`), computed here independently of the SDK.

Files a user shares come in the message event (`file`), with a `url_private_download`
on this server that streams the bytes to a request with the bot token and, as Slack does
for a token that may not read them, redirects any other request to a sign-in page.

Socket Mode: `apps.connections.open` (with the app-level token) answers a websocket URL
on this server; the socket says `hello`, then sends each queued envelope
(`events_api`, `interactive`, `slash_commands`) and records the app's acknowledgements
(`{"envelope_id": ...}`). An envelope not acknowledged is sent again, with its
`retry_attempt` one higher, on the app's next connection, as Slack does.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fake_platform import HeldFiles, RecordedCalls

BOT_USER = "UBOT0001"
BOT_ID = "BBOT0001"
TEAM = "T0TEAM01"
MAX_TEXT = 40_000


def signature(secret: str, timestamp: int, body: bytes) -> str:
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class FakeSlack(RecordedCalls):
    SEND = "chat.postMessage"  # not a field: no annotation
    token: str
    signing_secret: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    posted: list[dict[str, Any]] = field(default_factory=list)  # the bot's messages, as now
    asked: list[dict[str, Any]] = field(default_factory=list)  # those with buttons, as posted
    reactions: set[tuple[str, str, str]] = field(default_factory=set)  # channel, ts, name
    fail_next: dict[str, int] = field(default_factory=dict)  # method -> 500s to answer
    limit_next: dict[str, int] = field(default_factory=dict)  # method -> 429s to answer
    app_token: str = ""
    url: str = ""  # where this fake is served (the files' download links point there)
    files: HeldFiles = field(default_factory=HeldFiles)
    files_read: bool = True  # the app has the files:read scope
    unacked: dict[str, dict[str, Any]] = field(default_factory=dict)  # Socket Mode, by id
    acks: list[str] = field(default_factory=list)
    connections: int = 0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- what Slack sends the app -------------------------------------------------------------

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._ids):06d}"

    def event(
        self,
        text: str,
        *,
        user: str = "U0USER01",
        channel: str = "D0DM0001",
        channel_type: str = "im",
        thread_ts: str | None = None,
        files: Sequence[dict[str, Any]] = (),
        **extra: Any,
    ) -> dict[str, Any]:
        """An `event_callback` envelope of a user's message."""
        event: dict[str, Any] = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": self._ts(),
            "channel": channel,
            "channel_type": channel_type,
            **extra,
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        if files:
            event["subtype"] = "file_share"
            event["files"] = list(files)
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "api_app_id": "A0APP001",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(self._ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [
                {"team_id": TEAM, "user_id": BOT_USER, "is_bot": True, "enterprise_id": None}
            ],
        }

    def file(
        self,
        name: str,
        mimetype: str,
        data: bytes,
        *,
        stated: int | None = None,
        endless: bool = False,
    ) -> dict[str, Any]:
        """A file a user shares (for `event(files=...)`), held here to be downloaded
        (`stated`: the size Slack says, when not the real one; `endless`: a download that
        never ends)."""
        file_id = self.files.keep(data, endless=endless)
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rpartition(".")[2],
            "size": len(data) if stated is None else stated,
            "mode": "hosted",
            "url_private": f"{self.url}/files-pri/{TEAM}-{file_id}/{name}",
            "url_private_download": f"{self.url}/files-pri/{TEAM}-{file_id}/download/{name}",
        }

    async def download(self, request: Request) -> Response:
        """A file's download link: its bytes for the bot token (of an app with the
        files:read scope), a redirect to the sign-in page otherwise."""
        file_id = request.path_params["file"].removeprefix(f"{TEAM}-")
        bearer = request.headers.get("authorization") == f"Bearer {self.token}"
        authorized = bearer and self.files_read
        with self._lock:
            self.calls.append(("download", {"file": file_id, "authorized": authorized}))
        if not authorized:
            return RedirectResponse(f"{self.url}/?redir=%2Ffiles-pri%2F{file_id}", status_code=302)
        return self.files.response(file_id)

    def press_payload(
        self, sent: dict[str, Any], button: int, *, user: str = "U0USER01"
    ) -> dict[str, Any]:
        """The interactivity payload of a press of button `button` of the bot's message
        `sent` (from `posted`)."""
        action = sent["blocks"][-1]["elements"][button]
        return {
            "type": "block_actions",
            "token": "legacy-verification-token",
            "user": {"id": user, "username": f"user-{user}", "team_id": TEAM},
            "team": {"id": TEAM},
            "channel": {"id": sent["channel"]},
            "container": {"type": "message", "message_ts": sent["ts"]},
            "message": {k: sent[k] for k in ("ts", "text", "blocks", "thread_ts") if k in sent},
            "trigger_id": f"trig-{next(self._ids)}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action["action_id"],
                    "block_id": sent["blocks"][-1]["block_id"],
                    "value": action["value"],
                    "action_ts": self._ts(),
                }
            ],
        }

    def press(self, sent: dict[str, Any], button: int, *, user: str = "U0USER01") -> str:
        """The same as the form body Slack posts: one field, `payload`."""
        return urlencode({"payload": json.dumps(self.press_payload(sent, button, user=user))})

    def command_fields(
        self, command: str, text: str = "", *, user: str = "U0USER01", channel: str = "D0DM0001"
    ) -> dict[str, str]:
        """The fields of a slash command."""
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "channel_id": channel,
            "user_id": user,
            "command": command,
            "text": text,
            "trigger_id": f"trig-{next(self._ids)}",
            "response_url": "https://hooks.slack.invalid/commands/1",
        }

    def command(self, command: str, text: str = "", **kwargs: str) -> str:
        """The same as the form body Slack posts."""
        return urlencode(self.command_fields(command, text, **kwargs))

    def headers(self, body: bytes, *, age: int = 0, secret: str | None = None) -> dict[str, str]:
        """The signature headers Slack sends with `body` (`age` seconds ago)."""
        stamp = int(time.time()) - age
        return {
            "X-Slack-Request-Timestamp": str(stamp),
            "X-Slack-Signature": signature(secret or self.signing_secret, stamp, body),
        }

    def envelope(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Queue a Socket Mode envelope of `kind` (events_api, interactive, slash_commands)."""
        envelope = {
            "envelope_id": f"env-{next(self._ids)}",
            "type": kind,
            "payload": payload,
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
        }
        with self._lock:
            self.unacked[envelope["envelope_id"]] = envelope
        return envelope

    async def link(self, ws: WebSocket) -> None:
        """The Socket Mode websocket."""
        await ws.accept()
        with self._lock:
            self.connections += 1
            for e in self.unacked.values():  # sent before and not acknowledged: again
                e["retry_attempt"] += 1 if e.get("sent") else 0
        await ws.send_json({"type": "hello", "num_connections": 1,
                            "connection_info": {"app_id": "A0APP001"}})  # fmt: skip
        sent: set[str] = set()

        async def pump() -> None:
            while True:
                with self._lock:
                    ready = [dict(e) for k, e in self.unacked.items() if k not in sent]
                for e in ready:
                    sent.add(e["envelope_id"])
                    e.pop("sent", None)
                    await ws.send_json(e)
                    with self._lock:
                        if e["envelope_id"] in self.unacked:
                            self.unacked[e["envelope_id"]]["sent"] = True
                await asyncio.sleep(0.01)

        sender = asyncio.create_task(pump())
        try:
            while True:
                ack = json.loads(await ws.receive_text())
                with self._lock:
                    self.acks.append(ack["envelope_id"])
                    self.unacked.pop(ack["envelope_id"], None)
        except WebSocketDisconnect:
            pass
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    # -- the Web API ---------------------------------------------------------------------------

    async def endpoint(self, request: Request) -> Response:
        method = request.path_params["method"]
        token = self.app_token if method == "apps.connections.open" else self.token
        if request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        if method == "apps.connections.open":
            with self._lock:
                self.calls.append((method, {}))
            return JSONResponse({"ok": True, "url": f"ws://{request.url.netloc}/link/?t=1"})
        params: dict[str, Any] = dict(request.query_params)
        if request.headers.get("content-type", "").startswith("application/json"):
            params.update(await request.json())
        else:
            params.update({k: str(v) for k, v in (await request.form()).items()})
        with self._lock:
            self.calls.append((method, params))
            failures = self.fail_next.get(method, 0)
            if failures:
                self.fail_next[method] = failures - 1
            limited = self.limit_next.get(method, 0)
            if limited:
                self.limit_next[method] = limited - 1
        if limited:
            return JSONResponse(
                {"ok": False, "error": "ratelimited"}, status_code=429, headers={"Retry-After": "0"}
            )
        if failures:
            return JSONResponse({"ok": False, "error": "internal_error"}, status_code=500)
        result = self._result(method, params)
        ok = "error" not in result
        return JSONResponse({"ok": ok, **result})

    def _result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"url": "https://fake.slack/", "team": "Fake", "user": "stoker",
                    "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID}  # fmt: skip
        if method in ("chat.postMessage", "chat.postEphemeral", "chat.update"):
            text = str(params.get("text") or "")
            if not text.strip() and not params.get("blocks"):
                return {"error": "no_text"}
            if len(text) > MAX_TEXT:
                return {"error": "msg_too_long"}
            if method == "chat.postEphemeral":
                return {"message_ts": self._ts()}
            if method == "chat.update":
                return self._update(params)
            message = {**params, "ts": self._ts(), "user": BOT_USER, "bot_id": BOT_ID}
            with self._lock:
                self.posted.append(message)
                if params.get("blocks"):
                    self.asked.append(dict(message))
            return {"channel": params["channel"], "ts": message["ts"], "message": message}
        if method in ("reactions.add", "reactions.remove"):
            key = (str(params["channel"]), str(params["timestamp"]), str(params["name"]))
            with self._lock:
                if method == "reactions.add":
                    if key in self.reactions:
                        return {"error": "already_reacted"}
                    self.reactions.add(key)
                else:
                    if key not in self.reactions:
                        return {"error": "no_reaction"}
                    self.reactions.discard(key)
            return {}
        return {"error": "unknown_method"}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            for i, message in enumerate(self.posted):
                if message["channel"] == params["channel"] and message["ts"] == params["ts"]:
                    self.posted[i] = {**message, **params}
                    return {"channel": params["channel"], "ts": params["ts"]}
        return {"error": "message_not_found"}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/{method}", self.endpoint, methods=["GET", "POST"]),
                Route("/files-pri/{file}/download/{name}", self.download, methods=["GET"]),
                WebSocketRoute("/link/", self.link),
            ]
        )
