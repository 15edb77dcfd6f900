"""Who may talk to the bot, and how fast: an allowlist and a token bucket per chat.

The allowlist is empty by default, so a new bot answers nobody until the operator names
users or chats ("*" allows everyone, on purpose). The rate limit is per chat: a group's
members share it, so one chat cannot spend the whole gateway.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stoker.platforms.base import ChatKey

EVERYONE = "*"


@dataclass(frozen=True, slots=True, kw_only=True)
class Allowlist:
    """Users and chats the bot answers: a message passes when either is listed (or the
    space its chat is in, such as a Discord server)."""

    users: frozenset[str] = frozenset()
    chats: frozenset[str] = frozenset()

    def allows(self, key: ChatKey) -> bool:
        if EVERYONE in self.users or key.user in self.users or key.chat in self.chats:
            return True
        return bool(key.space) and key.space in self.chats


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """`per_minute` messages a minute on average per chat, `burst` at once; a
    `per_minute` of 0 turns the limit off."""

    per_minute: float = 20.0
    burst: int = 5


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float
    told: bool = False  # the chat was told it is over the limit since it last had a token


@dataclass
class ChatRates:
    """Token buckets, one per chat; `now` is injectable (monotonic seconds)."""

    limit: RateLimit
    now: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def take(self, chat: str) -> tuple[bool, bool]:
        """(allowed, tell): whether this message may run, and when not, whether it is
        the first refused since the chat last had room (the one that gets a notice)."""
        if self.limit.per_minute <= 0:
            return True, False
        now = self.now()
        b = self._buckets.get(chat)
        if b is None:
            b = self._buckets[chat] = _Bucket(tokens=float(self.limit.burst), at=now)
        b.tokens = min(
            float(self.limit.burst), b.tokens + (now - b.at) * self.limit.per_minute / 60
        )
        b.at = now
        if b.tokens >= 1:
            b.tokens -= 1
            b.told = False
            return True, False
        tell, b.told = not b.told, True
        return False, tell

    def wait(self, chat: str) -> float:
        """Seconds until the chat has room for one message again."""
        b = self._buckets.get(chat)
        if b is None or b.tokens >= 1:
            return 0.0
        return (1 - b.tokens) * 60 / self.limit.per_minute
