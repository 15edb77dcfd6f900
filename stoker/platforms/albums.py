"""Albums: messages the user sent together, answered as the one message they are.

A Telegram album is one message per photo, sharing a group id. The bridge answers an
album once no part has come for `SETTLE` seconds: one turn with every part's text and
attachments in the order they were sent, counted once against the chat's rate limit.
The parts are stored one by one as they come, so a restart finds them all pending.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from stoker.platforms.base import Message

SETTLE = 1.0  # seconds after an album's last part before it is answered, whole
REMEMBERED = 1024  # albums whose latest part's time is kept


class Albums:
    """When each album's latest part came (the newest `REMEMBERED` albums)."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self._latest: dict[str, float] = {}

    def came(self, message: Message) -> bool:
        """Note that a part of `message`'s album came; whether one came before (False
        for a message in no album)."""
        if not message.group:
            return False
        seen = message.group in self._latest
        self._latest[message.group] = self.now()
        while len(self._latest) > REMEMBERED:
            self._latest.pop(next(iter(self._latest)))
        return seen

    async def settled(self, group: str) -> None:
        """Returns once no part of `group` has come for `SETTLE` seconds (a part may
        come while this waits: then it waits on from that one)."""
        while True:
            wait = self._latest.get(group, 0.0) + SETTLE - self.now()
            if wait <= 0:
                return
            await asyncio.sleep(wait)


def merge(message: Message, parts: Sequence[Message]) -> Message:
    """`message` and the other `parts` of its album as one message: the texts (those
    with any) a paragraph apart and the attachments, in the order they were sent."""
    if not parts:
        return message
    every = sorted([message, *parts], key=lambda m: (len(m.id), m.id))
    text = "\n\n".join(m.text for m in every if m.text.strip())
    attachments = tuple(a for m in every for a in m.attachments)
    return replace(message, text=text, attachments=attachments)
