"""The chat platforms' tables: every inbound update seen, and which session a chat is in.

A part of the SQL store (both backends). An update is *accepted* once its row is
committed; only then does the platform hear that it arrived (Telegram's getUpdates
offset moves, a webhook gets its 200), so a crash after that loses nothing: the row
stays pending until its turn was answered and the answer delivered (each message of it
counted as it is, so a retry resends none), and a restart finishes it. A second delivery
of the same update id (a platform retry, a replica that polled it too) finds the row and
is dropped, so nothing is answered twice. A finished update keeps its key and loses its
body: the text lives on in the session's events.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from stoker.store._sql import SqlAccess


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingUpdate:
    """An accepted update whose answer was not delivered yet."""

    key: str  # the platform's id for it (Telegram update_id, Slack event_id, ...)
    chat: str  # the chat key it belongs to (updates of one chat are handled in order)
    body: str  # the update as the platform sent it (JSON)


class PlatformLog(SqlAccess):
    """What the SQL store offers the platform layer. Mixed into `SqlEventStore`."""

    async def accept_update(self, platform: str, key: str, *, chat: str, body: str) -> bool:
        """Commit an inbound update; False when it was seen before (by any process)."""
        mark = secrets.token_hex(8)  # who inserted the row, so two replicas never both win
        await self._write(
            [
                (
                    "INSERT INTO platform_updates (platform, update_key, chat, body, mark, "
                    "received_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (platform, key, chat, body, mark, time.time()),
                )
            ]
        )
        rows = await self._read(
            "SELECT mark FROM platform_updates WHERE platform = ? AND update_key = ?",
            (platform, key),
        )
        return bool(rows) and rows[0][0] == mark

    async def pending_updates(self, platform: str) -> list[PendingUpdate]:
        """Accepted and not finished, oldest first: what a restart must still answer."""
        rows = await self._read(
            "SELECT update_key, chat, body FROM platform_updates "
            "WHERE platform = ? AND done_at IS NULL ORDER BY received_at, update_key",
            (platform,),
        )
        return [PendingUpdate(key=k, chat=c, body=b) for k, c, b in rows]

    async def latest_updates(self, platform: str, *, chats: int = 100) -> list[tuple[str, str]]:
        """(chat key, update key) of the newest update accepted from each chat, the
        `chats` most recently active first: where a platform that does not redeliver
        what it sent while the gateway was down (Discord) catches up from."""
        rows = await self._read(
            "SELECT u.chat, u.update_key FROM platform_updates u JOIN ("
            "SELECT chat, MAX(received_at) AS last FROM platform_updates "
            "WHERE platform = ? GROUP BY chat) m ON u.chat = m.chat AND u.received_at = m.last "
            "WHERE u.platform = ? ORDER BY u.received_at DESC, u.update_key DESC LIMIT ?",
            (platform, platform, chats),
        )
        return [(str(c), str(k)) for c, k in rows]

    async def is_pending(self, platform: str, key: str) -> bool:
        """Whether the update is accepted and not finished (by any process)."""
        rows = await self._read(
            "SELECT 1 FROM platform_updates WHERE platform = ? AND update_key = ? "
            "AND done_at IS NULL",
            (platform, key),
        )
        return bool(rows)

    async def delivered(self, platform: str, key: str) -> int:
        """How many of the update's answer messages the platform accepted so far."""
        rows = await self._read(
            "SELECT delivered FROM platform_updates WHERE platform = ? AND update_key = ?",
            (platform, key),
        )
        return int(rows[0][0]) if rows else 0

    async def mark_delivered(self, platform: str, key: str, count: int) -> None:
        await self._write(
            [
                (
                    "UPDATE platform_updates SET delivered = ? "
                    "WHERE platform = ? AND update_key = ?",
                    (count, platform, key),
                )
            ]
        )

    async def finish_update(self, platform: str, key: str) -> None:
        """The update was answered (or needs no answer): it is never handled again."""
        await self._write(
            [
                (
                    "UPDATE platform_updates SET done_at = ?, body = '' "
                    "WHERE platform = ? AND update_key = ?",
                    (time.time(), platform, key),
                )
            ]
        )

    async def chat_session(self, platform: str, chat: str) -> str | None:
        """The session a chat key is in now, or None before its first message."""
        rows = await self._read(
            "SELECT session_id FROM platform_chats WHERE platform = ? AND chat = ?",
            (platform, chat),
        )
        return str(rows[0][0]) if rows else None

    async def bind_chat(self, platform: str, chat: str, session_id: str) -> None:
        """Move a chat key to `session_id` (its first session, or the one /new started)."""
        await self._write(
            [
                (
                    "INSERT INTO platform_chats (platform, chat, session_id, updated_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (platform, chat) DO UPDATE SET "
                    "session_id = excluded.session_id, updated_at = excluded.updated_at",
                    (platform, chat, session_id, time.time()),
                )
            ]
        )
