"""Discord, through discord.py (the `discord` extra).

discord.py holds the gateway connection (identify, heartbeats, resume, reconnects,
sharding) and makes every REST call with its rate-limit buckets. The client is an
`AutoShardedClient`, which asks REST for the gateway's URL and its shard count, so a bot
in many servers is sharded as Discord says, and `api_url` alone points it at another
Discord (a test's fake, a rate-limit proxy).

Discord does not deliver again what it sent while the bot was offline, and the
gateway has no acknowledgement for the inbox to wait on. So at each fresh connection
(READY, not RESUMED: a resume replays what was missed) the adapter catches up: for the
chats it talked in lately, the channel's messages after the newest one it accepted,
read from REST and handed to the inbox like live ones (a duplicate is dropped by the
store), before any live message. A message the inbox could not store is tried again a
few times, and otherwise left to the next catch-up, since nothing newer of its chat was
accepted.

Which messages are answered: every one in a direct message; in a server channel or
thread, those that mention the bot (`@Stoker ...`), so the bot needs no privileged
intent (Discord gives a message's content to a bot it mentions or DMs). A thread is a
channel of its own, so it is its own chat. Replies are at most 2,000 characters, sent
with no allowed mentions (model output never pings anyone) and without link embeds.
Attachments are `Attachment`s with Discord's content type; `fetch` reads them from
Discord's CDN, which needs no token.
The gateway's commands are registered as Discord slash commands at each start (a bulk
overwrite, so the list always matches the gateway's); one is stored like a message,
keyed by its interaction id, and answered in place of Discord's "thinking..." note.
Typed as text (`/usage` in a DM, `@Stoker /usage` in a channel) they work too.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import discord
from discord.http import Route, handle_message_parameters
from starlette.routing import BaseRoute

from stoker.errors import ConfigError
from stoker.gateway.commands import HELP
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
from stoker.gateway.platforms.discord_markdown import discord_markdown
from stoker.gateway.platforms.download import get_within, on_hosts
from stoker.gateway.platforms.redact import Redact
from stoker.gateway.platforms.settings import DiscordSettings
from stoker.gateway.platforms.text import render, split, utf16_length

log = logging.getLogger(__name__)

NAME = "discord"
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
    "stoker.gateway.platforms.bridge",
)
PRESS = "stoker:"  # custom_id prefix of this adapter's buttons: "stoker:TOKEN:INDEX"
CONNECT_SECONDS = 60.0  # for the gateway's READY at start
CATCH_UP_CHATS = 50  # the chats most recently active that a fresh connection catches up
CATCH_UP_MESSAGES = 100  # per chat: Discord's most per history request
ACCEPT_TRIES = 4  # a message the inbox could not store, tried again after 1, 2, 4 s
CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
REMEMBERED = 256  # button presses and slash commands waiting for their answer
_ANSWERED = (discord.MessageType.default, discord.MessageType.reply)


def _slash_commands() -> list[dict[str, Any]]:
    """The gateway's commands as Discord application commands (one string option for
    the two that take an argument)."""
    options: dict[str, dict[str, Any]] = {
        "model": {"name": "name", "description": "the model to switch to"},
        "reasoning": {
            "name": "level",
            "description": "the reasoning effort",
            "choices": [{"name": c, "value": c} for c in ("low", "medium", "high", "off")],
        },
    }
    out = []
    for name, what in HELP.items():
        description = what.partition(": ")[2] if what.startswith("/") else what
        command: dict[str, Any] = {"name": name, "type": 1, "description": description[:100]}
        if name in options:
            command["options"] = [{"type": 3, "required": True, **options[name]}]
        out.append(command)
    return out


def _intents() -> discord.Intents:
    """Servers, and messages in them and in DMs; no privileged intent: a message's
    content comes with a mention of the bot."""
    intents = discord.Intents.none()
    intents.guilds = True  # discord.py's state (channels, threads) is built on it
    intents.guild_messages = True
    intents.dm_messages = True
    return intents


class _Client(discord.AutoShardedClient):
    """discord.py's client, handing what arrives to the adapter."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        # The bot has no voice: no warning that voice's libraries are missing.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(
            intents=_intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            max_messages=None,  # the bot keeps no message cache
            chunk_guilds_at_startup=False,
        )
        self.adapter = adapter

    async def on_connect(self) -> None:
        await self.adapter.connected()

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter.received(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.adapter.interaction(interaction)


class DiscordAdapter:
    """The Discord gateway and REST API, as `base.Adapter`."""

    name = NAME
    limit = LIMIT
    formatting = FORMATTING

    def __init__(self, settings: DiscordSettings) -> None:
        self.settings = settings
        self._redact = Redact(settings.token)
        self._client: _Client | None = None
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
    def client(self) -> _Client:
        if self._client is None:
            raise RuntimeError("the Discord adapter is not started")
        return self._client

    @property
    def _me(self) -> int:
        user = self.client.user
        return user.id if user is not None else 0

    # -- receiving ---------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        for name in LOGGERS:
            logging.getLogger(name).addFilter(self._redact)
        self._inbox = inbox
        # discord.py builds every REST URL (the gateway's too) on this class attribute:
        # one Discord per process, restored at stop.
        self._base, Route.BASE = Route.BASE, self.settings.api_url
        self._client = _Client(self)
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
                self.client.application_id or 0, _slash_commands()
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
        for name in LOGGERS:
            logging.getLogger(name).removeFilter(self._redact)

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
                raw = self._raw(message, dm=dm)
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
        raw = self._raw(message, dm=dm)
        if raw is not None:
            await self._deliver(raw)

    def _raw(self, message: discord.Message, *, dm: bool) -> dict[str, Any] | None:
        """What the store keeps of a message the bot should answer (None otherwise): the
        text as the model reads it, the bot's mention taken out."""
        if message.author.bot or message.webhook_id or message.type not in _ANSWERED:
            return None  # bots (this one too), webhooks, joins, pins: not a user talking
        me = self._me
        mentioned = any(u.id == me for u in message.mentions) or me in message.raw_mentions
        if not dm and not mentioned:
            return None
        text = re.sub(rf"<@!?{me}>", "", message.content).strip()
        guild = message.guild.id if message.guild else getattr(message.channel, "guild_id", None)
        return {
            "type": "message",
            "id": str(message.id),
            "channel_id": str(message.channel.id),
            "guild_id": str(guild) if guild else "",
            "author_id": str(message.author.id),
            "text": text,
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
        if interaction.type != discord.InteractionType.component or not custom_id.startswith(PRESS):
            return
        _remember(self._presses, interaction)
        await self._deliver(
            {
                "type": "press",
                "id": str(interaction.id),
                "channel_id": str(interaction.channel_id or ""),
                "guild_id": str(interaction.guild_id or ""),
                "user_id": str(interaction.user.id),
                "custom_id": custom_id,
            }
        )

    async def _command(self, interaction: discord.Interaction, data: Mapping[str, Any]) -> None:
        """A slash command, stored as the message it stands for. Discord wants an answer
        within 3 s: an allowed user's command is deferred at once ("thinking..."), and
        its answer replaces that (`send`). A stranger's gets nothing."""
        args = [str(o.get("value", "")) for o in data.get("options") or () if isinstance(o, dict)]
        raw = {
            "type": "message",
            "id": str(interaction.id),
            "channel_id": str(interaction.channel_id or ""),
            "guild_id": str(interaction.guild_id or ""),
            "author_id": str(interaction.user.id),
            "text": " ".join([f"/{data.get('name', '')}", *args]).strip(),
            "attachments": [],
        }
        update = _message(raw)
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
        kind = raw.get("type")
        if kind == "message":
            return _message(raw)
        if kind == "press":
            return _press(raw)
        return None

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
            view.add_item(
                discord.ui.Button(label=choice[:80], custom_id=f"{PRESS}{token}:{i}", style=style)
            )
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
    key = ChatKey(platform=NAME, chat=channel, user=user, space=str(raw.get("guild_id") or ""))
    return Message(id=update, key=key, text=text, attachments=attachments)


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
    key = ChatKey(platform=NAME, chat=channel, user=user, space=str(raw.get("guild_id") or ""))
    return ButtonPress(id=str(raw.get("id")), key=key, question=token, choice=int(index))
