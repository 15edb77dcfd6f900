"""Slack, through slack-sdk (the `slack` extra).

The SDK's `AsyncWebClient` makes every Web API call. Receiving is ours, as for
Telegram, because Slack must hear an event arrived only once it is durably accepted:
the Events API route checks Slack's request signature, hands the event to the inbox,
and only then answers 200 (anything else, or no answer within 3 s, makes Slack deliver
it again with the same `event_id`, which the store drops). Button presses (the
interactivity URL) and slash commands come in on their own routes, signed the same
way. In Socket Mode the SDK's client holds the websocket and each envelope is
acknowledged after the inbox accepted it.

Which messages are answered: every one in a direct message with the app; in a channel,
those that mention it (`@stoker ...`), and in a thread where a user talked with it (their
mention in the thread started a session), their later messages there without one. The
`app_mention` event is ignored: the `message` event carries the same message, and
answering both would answer twice.
Replies are mrkdwn (`mrkdwn.slack_mrkdwn`) in messages of at most 4,000 characters, in
the thread of the message when it was in a thread. Slack has no typing indicator for
apps: the user's message gets an :hourglass_flowing_sand: reaction while the turn runs.

Files shared with a message are `Attachment`s with Slack's `mimetype`; `fetch` downloads
`url_private_download` with the bot token (the `files:read` scope), sent only to Slack's
own hosts and never followed through a redirect (Slack redirects to its login page when
the token may not read the file).
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    async_default_handlers,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from stoker.config import DEFAULT_LIMITS
from stoker.gateway.platforms.base import (
    Attachment,
    AttachmentRefused,
    ButtonPress,
    ChatKey,
    ChatRef,
    Context,
    Inbox,
    Message,
    MessageRef,
    Update,
)
from stoker.gateway.platforms.download import get_within, on_hosts
from stoker.gateway.platforms.mrkdwn import escape, slack_mrkdwn
from stoker.gateway.platforms.redact import Redact
from stoker.gateway.platforms.settings import SlackSettings
from stoker.gateway.platforms.text import render

log = logging.getLogger(__name__)

NAME = "slack"
# Slack truncates a message's text past 40,000 characters and asks apps to keep it to
# 4,000; longer ones are hard to read in a channel anyway.
LIMIT = 4000
WORKING = "hourglass_flowing_sand"  # the reaction that stands for "typing"
MAX_BODY = DEFAULT_LIMITS.max_body_bytes
# The SDK logs each request and response through the logger it is given (this one),
# where a filter masks the secrets, whatever the SDK's own redaction misses.
SDK_LOG = logging.getLogger(f"{__name__}.sdk")
FORMATTING = (
    "You are chatting with the user in Slack. Keep replies short. Formatting that shows: "
    "**bold**, *italic*, ~~strike~~, `inline code`, fenced code blocks with ``` and "
    "[links](https://...). Headings show as bold lines; tables and nested lists do not "
    "render, so use short lines or simple '-' lists instead."
)
RATE_LIMIT_RETRIES = 3
REMEMBERED = 4096  # user messages whose reaction may still be pending
NO_SCOPE = "Slack refused the download: the app needs the files:read scope"
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


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


class SlackAdapter:
    """The Slack Web API and Events API, as `base.Adapter`."""

    name = NAME
    limit = LIMIT
    formatting = FORMATTING

    def __init__(self, settings: SlackSettings) -> None:
        self.settings = settings
        self._verifier = SignatureVerifier(settings.signing_secret or "")
        self._redact = [
            Redact(s) for s in (settings.token, settings.signing_secret, settings.app_token) if s
        ]
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._socket: SocketModeClient | None = None
        self._messages: dict[str, tuple[str, str]] = {}  # update -> (channel, ts) it answers
        self._working: set[str] = set()  # updates whose message shows the reaction

    @property
    def client(self) -> AsyncWebClient:
        if self._client is None:
            raise RuntimeError("the Slack adapter is not started")
        return self._client

    # -- receiving ---------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        for f in self._redact:
            SDK_LOG.addFilter(f)
        self._session = aiohttp.ClientSession()
        self._client = AsyncWebClient(
            token=self.settings.token,
            base_url=self.settings.api_url + "/",
            session=self._session,
            logger=SDK_LOG,
            # Slack answers 429 with Retry-After past about one message a second in a
            # channel (tool progress edits come faster): wait and send again.
            retry_handlers=[
                *async_default_handlers(),
                AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
            ],
        )
        await self._client.auth_test()  # a wrong token fails the start, clearly
        if self.settings.mode == "socket":
            self._socket = SocketModeClient(
                app_token=self.settings.app_token or "", logger=SDK_LOG, web_client=self._client
            )
            self._socket.socket_mode_request_listeners.append(self._listener(inbox))
            await self._socket.connect()  # type: ignore[no-untyped-call]

    def _listener(self, inbox: Inbox) -> Any:
        """Socket Mode: each envelope is acknowledged once the inbox accepted what it
        carries; one that was not stays unacknowledged, and Slack sends it again."""

        async def on_request(client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
            raw = _unwrap(req.type, req.payload)
            if raw is not None:
                try:
                    await inbox.accept(_public(raw))
                except Exception as exc:
                    log.warning("slack: envelope %s not accepted: %r", req.envelope_id, exc)
                    return
            await client.send_socket_mode_response(SocketModeResponse(req.envelope_id))

        return on_request

    async def stop(self) -> None:
        if self._socket is not None:
            await self._socket.close()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._client = None
        for f in self._redact:
            SDK_LOG.removeFilter(f)

    def routes(self, inbox: Inbox) -> Sequence[BaseRoute]:
        if self.settings.mode != "events":
            return ()

        async def signed(request: Request) -> bytes | Response:
            body = await request.body()
            if len(body) > MAX_BODY:
                return Response(status_code=413)
            stamp = request.headers.get("X-Slack-Request-Timestamp", "")
            given = request.headers.get("X-Slack-Signature", "")
            if not stamp.isdigit() or not self._verifier.is_valid(body, stamp, given):
                return Response(status_code=401)
            return body

        async def events(request: Request) -> Response:
            body = await signed(request)
            if isinstance(body, Response):
                return body
            try:
                raw = json.loads(body)
            except ValueError:
                return Response(status_code=400)
            if not isinstance(raw, dict):
                return Response(status_code=400)
            if raw.get("type") == "url_verification":
                return JSONResponse({"challenge": str(raw.get("challenge", ""))})
            if raw.get("type") == "event_callback":
                if not isinstance(raw.get("event_id"), str) or not raw["event_id"]:
                    return Response(status_code=400)
                await inbox.accept(_public(raw))  # raises (a 500) when not stored: retried
            return Response(status_code=200)

        async def actions(request: Request) -> Response:
            body = await signed(request)
            if isinstance(body, Response):
                return body
            try:
                raw = json.loads(parse_qs(body.decode())["payload"][0])
            except (ValueError, KeyError, UnicodeDecodeError):
                return Response(status_code=400)
            if not isinstance(raw, dict):
                return Response(status_code=400)
            if raw.get("type") == "block_actions":  # other interactions are not ours
                await inbox.accept(_public(raw))
            return Response(status_code=200)

        async def commands(request: Request) -> Response:
            body = await signed(request)
            if isinstance(body, Response):
                return body
            try:
                form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            except UnicodeDecodeError:
                return Response(status_code=400)
            await inbox.accept(_public({**form, "type": "slash_command"}))
            return Response(status_code=200)  # an empty 200: the answer comes as a message

        base = self.settings.path
        return (
            Route(f"{base}/events", events, methods=["POST"]),
            Route(f"{base}/actions", actions, methods=["POST"]),
            Route(f"{base}/commands", commands, methods=["POST"]),
        )

    def parse(self, raw: Mapping[str, Any]) -> Update | None:
        kind = raw.get("type")
        if kind == "event_callback":
            return self._message(raw)
        if kind == "block_actions":
            return _press(raw)
        if kind == "slash_command":
            return _command(raw)
        return None

    def _message(self, raw: Mapping[str, Any]) -> Message | None:
        event = raw.get("event")
        if not isinstance(event, Mapping) or event.get("type") != "message":
            return None  # app_mention too: its message comes as a `message` event
        # Edits, deletions, joins, bots' posts (this app's too) are not a user talking.
        if event.get("bot_id") or event.get("subtype") not in (None, "file_share"):
            return None
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
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
            tuple(_file(f) for f in files if isinstance(f, Mapping))
            if isinstance(files, list)
            else ()
        )
        if not text and not attachments:
            return None
        if isinstance(ts, str):
            self._messages[update] = (channel, ts)
            if len(self._messages) > REMEMBERED:  # refused by the rate limit, never answered
                self._messages.pop(next(iter(self._messages)))
        key = ChatKey(
            platform=NAME,
            chat=channel,
            thread=thread if isinstance(thread, str) else "",
            user=user,
        )
        return Message(id=update, key=key, text=text, attachments=attachments, followup=followup)

    # -- sending -----------------------------------------------------------------------------

    def render(self, text: str) -> list[str]:
        return render(text, self.limit, slack_mrkdwn)

    async def send(
        self, ctx: Context, chat: ChatRef, text: str, *, markup: bool = True, quiet: bool = False
    ) -> MessageRef:
        # `quiet` has no Slack equivalent: a bot's messages notify as the channel says.
        sent = await self.client.chat_postMessage(
            channel=chat.chat,
            text=text if markup else escape(text),
            thread_ts=chat.thread or None,
            mrkdwn=markup,
            unfurl_links=False,
        )
        if not quiet:
            await self._done(ctx)
        return MessageRef(chat=chat.chat, id=str(sent["ts"]))

    async def edit(self, ctx: Context, message: MessageRef, text: str) -> None:
        await self.client.chat_update(
            channel=message.chat, ts=message.id, text=escape(text), blocks=[]
        )

    async def typing(self, ctx: Context, chat: ChatRef) -> None:
        """The reaction on the user's message, once per update (removed by the answer)."""
        where = self._messages.get(ctx.update)
        if where is None or ctx.update in self._working:
            return
        self._working.add(ctx.update)
        try:
            await self.client.reactions_add(channel=where[0], timestamp=where[1], name=WORKING)
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":  # a restart's second try
                raise

    async def _done(self, ctx: Context) -> None:
        """The answer went out: the reaction goes (cosmetic, never fails the reply)."""
        if ctx.update not in self._working:
            return
        self._working.discard(ctx.update)
        channel, ts = self._messages.pop(ctx.update)
        try:
            await self.client.reactions_remove(channel=channel, timestamp=ts, name=WORKING)
        except SlackApiError as exc:
            log.debug("slack: removing the reaction failed: %s", exc.response.get("error"))

    async def ask(
        self, ctx: Context, chat: ChatRef, question: str, choices: Sequence[str], token: str
    ) -> MessageRef:
        buttons = [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": choice[:75]},
                "action_id": f"choice-{i}",
                "value": f"{token}:{i}",
            }
            for i, choice in enumerate(choices)
        ]
        sent = await self.client.chat_postMessage(
            channel=chat.chat,
            text=escape(question),
            thread_ts=chat.thread or None,
            blocks=[
                {"type": "section", "text": {"type": "plain_text", "text": question[:3000]}},
                {"type": "actions", "block_id": f"ask-{token}", "elements": buttons},
            ],
        )
        return MessageRef(chat=chat.chat, id=str(sent["ts"]))

    async def fetch(self, ctx: Context, attachment: Attachment, limit: int) -> bytes:
        if not attachment.ref:
            raise AttachmentRefused("Slack gave no download link (hidden by the plan, or deleted)")
        if not self._slacks(attachment.ref) or self._session is None:
            raise AttachmentRefused("its download link is not Slack's")
        return await get_within(
            self._session,
            attachment.ref,
            limit,
            who="Slack",
            # Slack redirects to its sign-in page when the token may not read the file
            refusals=dict.fromkeys((301, 302, 303, 307, 308, 401, 403), NO_SCOPE),
            headers={"Authorization": f"Bearer {self.settings.token}"},
        )

    def _slacks(self, url: str) -> bool:
        """Whether `url` is on a Slack host (or the configured API's, a test's fake): the
        only places the bot token is sent."""
        return on_hosts(
            url,
            self.settings.api_url,
            lambda host: host == "slack.com" or host.endswith(".slack.com"),
        )

    async def pressed(self, ctx: Context, press: ButtonPress, note: str) -> None:
        """The note, seen only by who pressed (the question itself is the bridge's to
        edit: a note like "not yours to answer" must not replace it for everyone)."""
        await self.client.chat_postEphemeral(
            channel=press.key.chat,
            user=press.key.user,
            text=escape(note),
            thread_ts=press.key.thread or None,
        )


def _public(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The payload without Slack's legacy verification `token`, which is never stored."""
    return {k: v for k, v in raw.items() if k != "token"}


def _unwrap(kind: str, payload: Any) -> dict[str, Any] | None:
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
