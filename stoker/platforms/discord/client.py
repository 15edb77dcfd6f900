"""discord.py's client, as this adapter configures it, handing what arrives onward.

The client is an `AutoShardedClient`: it asks REST for the gateway's URL and its shard
count, so a bot in many servers is sharded as Discord says. It asks for servers and
their messages and direct messages, and no privileged intent: Discord gives a message's
content to a bot it mentions or DMs, which is all the bot answers. It keeps no message
cache, and every message it sends mentions nobody.
"""

from __future__ import annotations

from typing import Protocol

import discord


class Receiver(Protocol):
    """Where the client hands a fresh connection, a message and an interaction."""

    async def connected(self) -> None: ...
    async def received(self, message: discord.Message) -> None: ...
    async def interaction(self, interaction: discord.Interaction) -> None: ...


def intents() -> discord.Intents:
    """Servers, and messages in them and in DMs; no privileged intent."""
    wanted = discord.Intents.none()
    wanted.guilds = True  # discord.py's state (channels, threads) is built on it
    wanted.guild_messages = True
    wanted.dm_messages = True
    return wanted


class Client(discord.AutoShardedClient):
    """discord.py's client, handing what arrives to `receiver`."""

    def __init__(self, receiver: Receiver) -> None:
        # The bot has no voice: no warning that voice's libraries are missing.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(
            intents=intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            max_messages=None,  # the bot keeps no message cache
            chunk_guilds_at_startup=False,
        )
        self.receiver = receiver

    async def on_connect(self) -> None:
        await self.receiver.connected()

    async def on_message(self, message: discord.Message) -> None:
        await self.receiver.received(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.receiver.interaction(interaction)
