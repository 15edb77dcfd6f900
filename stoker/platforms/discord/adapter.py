"""Discord, through discord.py (the `discord` extra).

discord.py holds the gateway connection (identify, heartbeats, resume, reconnects,
sharding: `client`) and makes every REST call with its rate-limit buckets; `api_url`
alone points it at another Discord (a test's fake, a rate-limit proxy).

Discord does not deliver again what it sent while the bot was offline, and the
gateway has no acknowledgement for the inbox to wait on. So at each fresh connection
(READY, not RESUMED: a resume replays what was missed) the adapter catches up: for the
chats it talked in lately, the channel's messages after the newest one it accepted,
read from REST and handed to the inbox like live ones (a duplicate is dropped by the
store), before any live message. A message the inbox could not store is tried again a
few times, and otherwise left to the next catch-up, since nothing newer of its chat was
accepted.

Which messages are answered, and what the store keeps of them, is `updates`'; the slash
commands are `commands`'. Replies are at most 2,000 characters, sent with no allowed
mentions (model output never pings anyone) and without link embeds. `fetch` reads
attachments from Discord's CDN, which needs no token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import discord
from discord.http import Route, handle_message_parameters
from starlette.routing import BaseRoute

from stoker.errors import ConfigError
from stoker.platforms.base import (
    Attachment,
    AttachmentRefused,
    ButtonPress,
    ChatRef,
    Context,
    Inbox,
    MessageRef,
    Update,
    started,
)
from stoker.platforms.discord import updates
from stoker.platforms.discord.client import Client
from stoker.platforms.discord.commands import slash_commands
from stoker.platforms.discord.markup import discord_markdown
from stoker.platforms.discord.settings import DiscordSettings
from stoker.platforms.download import get_within, on_hosts
from stoker.platforms.redact import Redacting
from stoker.platforms.text import render, split, utf16_length

log = logging.getLogger(__name__)

LIMIT = 2000  # characters in a message's content
FORMATTING = (
    "You are chatting with the user in Discord. Keep replies short. Formatting that shows: "
    "**bold**, *italic*, ~~strike~~, `inline code`, fenced code blocks with ``` and "
    "[links](https://...). Tables do not render; use short lines or simple '-' lists instead."
)
# Loggers that may print a request or an error: the token is masked in all of them.
LOGGERS = (
    "discord",
    "discord.client",
    "discord.gateway",
    "discord.http",
    "discord.shard",
    "discord.state",
    "discord.webhook.async_",
    __name__,
    "stoker.platforms.bridge",
)
CONNECT_SECONDS = 60.0  # for the gateway's READY at start
CATCH_UP_CHATS = 50  # the chats most recently active that a fresh connection catches up
CATCH_UP_MESSAGES = 100  # per chat: Discord's most per history request
ACCEPT_TRIES = 4  # a message the inbox could not store, tried again after 1, 2, 4 s
CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
REMEMBERED = 256  # button presses and slash commands waiting for their answer


class DiscordAdapter:
    """The Discord gateway and REST API, as `base.Adapter`."""

    name = updates.NAME
    limit = LIMIT
    formatting = FORMATTING

    def __init__(self, settings: DiscordSettings) -> None:
        self.settings = settings
        self._redact = Redacting(LOGGERS, settings.token)
        self._client: Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._inbox: Inbox | None = None
        self._base = Route.BASE
        self._ready = asyncio.Event()  # the first READY's catch-up is done
        self._caught_up = asyncio.Event()  # live messages wait for the catch-up
        self._catching = asyncio.Lock()
        self._dm: dict[str, bool] = {}  # channel -> whether it is a direct message
        self._presses: dict[str, discord.Interaction] = {}  # interaction id -> its press
        self._commands: dict[str, discord.Interaction] = {}  # interaction id -> its command
        self._downloads: aiohttp.ClientSession | None = None  # attachments, from the CDN

    @property
    def client(self) -> Client:
        return started(self._client, "Discord")

    @property
    def _me(self) -> int:
        user = self.client.user
        return user.id if user is not None else 0

    # -- receiving ---------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._redact.install()
        self._inbox = inbox
        # discord.py builds every REST URL (the gateway's too) on this class attribute:
        # one Discord per process, restored at stop.
        self._base, Route.BASE = Route.BASE, self.settings.api_url
        self._client = Client(self)
        try:
            await self._client.login(self.settings.token)
        except discord.LoginFailure:
            await self.stop()
            raise ConfigError(
                "platforms.discord: Discord refused the bot token; copy it again from your "
                "application's Bot page in the Discord Developer Portal"
            ) from None
        except BaseException:
            await self.stop()
            raise
        await self._register_commands()
        self._runner = asyncio.create_task(self._client.connect(reconnect=True))
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait(
            {self._runner, ready}, timeout=CONNECT_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        if not ready.done():
            ready.cancel()
            failure = self._runner.exception() if self._runner.done() else None
            await self.stop()
            raise ConfigError(
                "platforms.discord: could not connect to Discord's gateway"
                + (f": {failure}" if failure else f" within {CONNECT_SECONDS:.0f} s")
            )

    async def _register_commands(self) -> None:
        """The slash commands, as the gateway has them now; without them (a refused
        request) commands still work typed as text."""
        try:
            await self.client.http.bulk_upsert_global_commands(
                self.client.application_id or 0, slash_commands()
            )
        except discord.HTTPException as exc:
            log.warning("discord: slash commands not registered (%s): type them instead", exc)

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        self._client = None
        if self._downloads is not None:
            await self._downloads.close()
            self._downloads = None
        Route.BASE = self._base
        self._redact.remove()

    def routes(self, inbox: Inbox) -> Sequence[BaseRoute]:
        return ()  # everything comes over the gateway connection

    async def connected(self) -> None:
        """A fresh gateway session (READY): catch up, then let live messages through."""
        self._caught_up.clear()
        try:
            async with self._catching:
                await self._catch_up()
        finally:
            self._caught_up.set()
            self._ready.set()

    async def _catch_up(self) -> None:
        assert self._inbox is not None
        try:
            latest = await self._inbox.latest()
        except Exception as exc:  # the store is down: live messages still come
            log.warning("discord: could not read where to catch up from: %r", exc)
            return
        for channel, after in list(latest.items())[:CATCH_UP_CHATS]:
            if not (channel.isdigit() and after.isdigit()):
                continue
            try:
                dm = await self._is_dm(channel)
                where = self.client.get_partial_messageable(int(channel))
                history = where.history(
                    limit=CATCH_UP_MESSAGES, after=discord.Object(id=int(after)), oldest_first=True
                )
                missed = [m async for m in history]
            except discord.HTTPException as exc:  # the channel is gone, or closed to the bot
                log.info("discord: no catching up in channel %s: %s", channel, exc.status)
                continue
            for message in missed:
                raw = updates.raw_message(message, me=self._me, dm=dm)
                if raw is not None:
                    await self._deliver(raw)

    async def _is_dm(self, channel: str) -> bool:
        if channel not in self._dm:
            data = await self.client.http.get_channel(int(channel))
            self._dm[channel] = data.get("type") in (1, 3)  # DM, group DM
        return self._dm[channel]

    async def received(self, message: discord.Message) -> None:
        await self._caught_up.wait()  # each chat's missed messages come before its new ones
        dm = message.guild is None and getattr(message.channel, "guild_id", None) is None
        self._dm[str(message.channel.id)] = dm
        raw = updates.raw_message(message, me=self._me, dm=dm)
        if raw is not None:
            await self._deliver(raw)

    async def _deliver(self, raw: Mapping[str, Any]) -> bool:
        """Hand `raw` to the inbox; a failure is tried again a few times, then left to
        the next catch-up (nothing newer of its chat was accepted after it)."""
        assert self._inbox is not None
        for attempt in range(ACCEPT_TRIES):
            try:
                await self._inbox.accept(raw)
                return True
            except Exception as exc:
                if attempt == ACCEPT_TRIES - 1:
                    log.warning("discord: message %s not accepted: %r", raw.get("id"), exc)
                    return False
                await asyncio.sleep(2.0**attempt)
        return False

    async def interaction(self, interaction: discord.Interaction) -> None:
        """A press of one of this adapter's buttons, or one of its slash commands (other
        interactions are not ours)."""
        data: Mapping[str, Any] = interaction.data or {}
        if interaction.type == discord.InteractionType.application_command:
            await self._command(interaction, data)
            return
        custom_id = str(data.get("custom_id", ""))
        if interaction.type != discord.InteractionType.component:
            return
        if not custom_id.startswith(updates.PRESS):
            return
        _remember(self._presses, interaction)
        await self._deliver(updates.raw_press(interaction, custom_id))

    async def _command(self, interaction: discord.Interaction, data: Mapping[str, Any]) -> None:
        """A slash command, stored as the message it stands for. Discord wants an answer
        within 3 s: an allowed user's command is deferred at once ("thinking..."), and
        its answer replaces that (`send`). A stranger's gets nothing."""
        raw = updates.raw_command(interaction, data)
        update = updates.parse(raw)
        if update is None or not self.settings.allowlist.allows(update.key):
            return
        try:
            await interaction.response.defer(thinking=True)
            _remember(self._commands, interaction)
        except discord.HTTPException as exc:  # too late to answer in place: in the channel
            log.info("discord: command %s not deferred: %s", interaction.id, exc)
        if await self._deliver(raw):
            return
        if self._commands.pop(str(interaction.id), None) is not None:  # the user is waiting
            note = "Stoker could not take the command now; try again."
            await interaction.followup.send(note, ephemeral=True)

    def parse(self, raw: Mapping[str, Any]) -> Update | None:
        return updates.parse(raw)

    # -- sending -----------------------------------------------------------------------------

    def render(self, text: str) -> list[str]:
        return render(text, self.limit, discord_markdown, measure=utf16_length)

    async def send(
        self, ctx: Context, chat: ChatRef, text: str, *, markup: bool = True, quiet: bool = False
    ) -> MessageRef:
        content = text if markup else _plain(text)
        command = self._commands.pop(ctx.update, None)
        if command is not None:  # its first message replaces the "thinking..." note
            try:
                answer = await command.followup.send(
                    content,
                    wait=True,
                    suppress_embeds=True,
                    silent=quiet,
                    allowed_mentions=discord.AllowedMentions.none(),
                )
                return MessageRef(chat=chat.chat, id=str(answer.id))
            except discord.NotFound:  # the interaction expired (15 min): in the channel
                log.info("discord: command %s expired; answering in the channel", ctx.update)
        flags = discord.MessageFlags(suppress_embeds=True, suppress_notifications=quiet)
        params = handle_message_parameters(
            content=content, flags=flags, allowed_mentions=discord.AllowedMentions.none()
        )
        sent = await self.client.http.send_message(int(chat.chat), params=params)
        return MessageRef(chat=chat.chat, id=str(sent["id"]))

    async def edit(self, ctx: Context, message: MessageRef, text: str) -> None:
        params = handle_message_parameters(
            content=_plain(text), view=None, allowed_mentions=discord.AllowedMentions.none()
        )
        await self.client.http.edit_message(int(message.chat), int(message.id), params=params)

    async def typing(self, ctx: Context, chat: ChatRef) -> None:
        await self.client.http.send_typing(int(chat.chat))

    async def ask(
        self, ctx: Context, chat: ChatRef, question: str, choices: Sequence[str], token: str
    ) -> MessageRef:
        view = discord.ui.View(timeout=None)  # only serialized: presses come to `interaction`
        for i, choice in enumerate(choices):
            style = discord.ButtonStyle.primary if i == 0 else discord.ButtonStyle.secondary
            custom_id = f"{updates.PRESS}{token}:{i}"
            view.add_item(discord.ui.Button(label=choice[:80], custom_id=custom_id, style=style))
        params = handle_message_parameters(
            content=_plain(question), view=view, allowed_mentions=discord.AllowedMentions.none()
        )
        sent = await self.client.http.send_message(int(chat.chat), params=params)
        return MessageRef(chat=chat.chat, id=str(sent["id"]))

    async def pressed(self, ctx: Context, press: ButtonPress, note: str) -> None:
        """The note, seen only by who pressed (Discord wants an answer within 3 s)."""
        interaction = self._presses.pop(press.id, None)
        if interaction is None:
            return
        try:
            await interaction.response.send_message(_plain(note), ephemeral=True)
        except discord.HTTPException as exc:  # the note is cosmetic; the answer stands
            log.info("discord: press %s not acknowledged: %s", press.id, exc)

    async def fetch(self, ctx: Context, attachment: Attachment, limit: int) -> bytes:
        """From Discord's CDN (or the configured API's host, a test's fake), without the
        bot token, which the CDN does not need; never through a redirect."""
        if not self._cdn(attachment.ref):
            raise AttachmentRefused("its download link is not Discord's")
        if self._downloads is None:
            self._downloads = aiohttp.ClientSession()
        gone = "Discord no longer serves it (deleted, or too old)"  # its signed link expired
        return await get_within(
            self._downloads, attachment.ref, limit, who="Discord", refusals={403: gone, 404: gone}
        )

    def _cdn(self, url: str) -> bool:
        return on_hosts(url, self.settings.api_url, CDN_HOSTS.__contains__)


def _remember(pending: dict[str, discord.Interaction], interaction: discord.Interaction) -> None:
    """Keep an interaction until it is answered; the oldest go past `REMEMBERED` (the
    ones the allowlist dropped, which are never answered)."""
    pending[str(interaction.id)] = interaction
    while len(pending) > REMEMBERED:
        pending.pop(next(iter(pending)))


def _plain(text: str) -> str:
    """Text shown as it is (markdown escaped), cut to fit one message."""
    escaped = discord.utils.escape_markdown(text)
    if utf16_length(escaped) <= LIMIT:
        return escaped
    return split(escaped, LIMIT - 2, measure=utf16_length)[0] + " …"
