"""Slack, through slack-sdk (the `slack` extra).

The SDK's `AsyncWebClient` makes every Web API call. Receiving is ours, as for
Telegram, because Slack must hear an event arrived only once it is durably accepted
(`inbound`: the signed Events API, interactivity and slash command routes, or a Socket
Mode listener); what a payload means is `updates`' to read.

Replies are mrkdwn (`markup.slack_mrkdwn`) in messages of at most 4,000 characters, in
the thread of the message when it was in a thread. Slack has no typing indicator for
apps: the user's message gets an :hourglass_flowing_sand: reaction while the turn runs.

`fetch` downloads a file's `url_private_download` with the bot token (the `files:read`
scope), sent only to Slack's own hosts and never followed through a redirect (Slack
redirects to its login page when the token may not read the file).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    async_default_handlers,
)
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient
from starlette.routing import BaseRoute

from stoker.platforms.base import (
    Attachment,
    AttachmentRefused,
    ButtonPress,
    ChatRef,
    Context,
    Inbox,
    Message,
    MessageRef,
    Update,
    started,
)
from stoker.platforms.download import get_within, on_hosts
from stoker.platforms.redact import Redacting
from stoker.platforms.slack import inbound, updates
from stoker.platforms.slack.markup import escape, slack_mrkdwn
from stoker.platforms.slack.settings import SlackSettings
from stoker.platforms.text import render

log = logging.getLogger(__name__)

# Slack truncates a message's text past 40,000 characters and asks apps to keep it to
# 4,000; longer ones are hard to read in a channel anyway.
LIMIT = 4000
WORKING = "hourglass_flowing_sand"  # the reaction that stands for "typing"
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


class SlackAdapter:
    """The Slack Web API and Events API, as `base.Adapter`."""

    name = updates.NAME
    limit = LIMIT
    formatting = FORMATTING

    def __init__(self, settings: SlackSettings) -> None:
        self.settings = settings
        secrets = (settings.token, settings.signing_secret, settings.app_token)
        self._redact = Redacting([SDK_LOG.name], *secrets)
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._socket: SocketModeClient | None = None
        self._messages: dict[str, tuple[str, str]] = {}  # update -> (channel, ts) it answers
        self._working: set[str] = set()  # updates whose message shows the reaction

    @property
    def client(self) -> AsyncWebClient:
        return started(self._client, "Slack")

    # -- receiving ---------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._redact.install()
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
            self._socket.socket_mode_request_listeners.append(inbound.listener(inbox))
            await self._socket.connect()  # type: ignore[no-untyped-call]

    async def stop(self) -> None:
        if self._socket is not None:
            await self._socket.close()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._client = None
        self._redact.remove()

    def routes(self, inbox: Inbox) -> Sequence[BaseRoute]:
        if self.settings.mode != "events":
            return ()
        return inbound.routes(self.settings.path, self.settings.signing_secret or "", inbox)

    def parse(self, raw: Mapping[str, Any]) -> Update | None:
        update = updates.parse(raw)
        if isinstance(update, Message) and (ts := updates.posted_at(raw)):
            self._messages[update.id] = (update.key.chat, ts)
            if len(self._messages) > REMEMBERED:  # refused by the rate limit, never answered
                self._messages.pop(next(iter(self._messages)))
        return update

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
