"""What the gateway keeps in the SQL store besides sessions: heads, idempotent responses,
leases, and where OpenAI-compatible clients' conversations stand.

A part of the SQL store (both backends), mixed into `SqlEventStore` as `ProxyLog` and
`PlatformLog` are: a replica finds here whether another wrote to a session since it
looked, what it answered to a retried request, which replica runs a session's
background work, and which session a client's resent history continues.
"""

from __future__ import annotations

import time

from stoker.store._sql import Op, SqlAccess

STARTED = ""  # an idempotency key whose turn began and has no response yet


class GatewayLog(SqlAccess):
    """What the SQL store offers the gateway. Mixed into `SqlEventStore`."""

    async def head(self, session_id: str) -> tuple[str | None, int]:
        """(owner, last event number) in one query: how a process notices that another
        one wrote to a session since it last looked."""
        owner, last = await self._session_row(
            "SELECT s.owner, (SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = s.id) "
            "FROM sessions s WHERE s.id = ?",
            session_id,
        )
        return owner, int(last)

    async def owner(self, session_id: str) -> str | None:
        """Who owns a session (None for sessions made outside the gateway)."""
        row = await self._session_row("SELECT owner FROM sessions WHERE id = ?", session_id)
        return row[0]  # type: ignore[no-any-return]

    async def idempotent_response(self, session_id: str, key: str) -> str | None:
        """The response stored for a retried request with this idempotency key, if any;
        `STARTED` when its turn began (its user message is stored) and never answered."""
        rows = await self._read(
            "SELECT response FROM idempotency WHERE session_id = ? AND key = ?", (session_id, key)
        )
        return rows[0][0] if rows else None

    async def remember_response(self, session_id: str, key: str, response: str) -> None:
        await self._write([response_op(session_id, key, response)])

    async def take_lease(self, name: str, holder: str, *, seconds: float) -> bool:
        """Whether `holder` now holds the lease `name` for `seconds` (taken, renewed, or
        taken over after it expired). Background work (keep-warm, reviews) that several
        replicas may start for one session takes one first, so it runs once. Expiry uses
        the replicas' wall clocks, which deployments keep in sync."""
        now = time.time()
        await self._write(
            [
                (
                    "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
                    "expires_at = excluded.expires_at "
                    "WHERE leases.holder = excluded.holder OR leases.expires_at < ?",
                    (name, holder, now + seconds, now),
                )
            ]
        )
        rows = await self._read("SELECT holder FROM leases WHERE name = ?", (name,))
        return bool(rows) and rows[0][0] == holder

    async def drop_lease(self, name: str, holder: str) -> None:
        """Give the lease back (only if `holder` still holds it)."""
        await self._write([("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))])

    async def drop_leases(self, holder: str) -> None:
        """Give back every lease of `holder` (a replica shutting down)."""
        await self._write([("DELETE FROM leases WHERE holder = ?", (holder,))])

    async def remember_client_history(
        self, session_id: str, history: str, *, response_id: str | None = None
    ) -> None:
        """Where the conversation of an OpenAI-compatible client now stands in this session:
        the hash of the history as the client holds it (and the id of the Responses API
        answer that ended it), with the session's message count, so a later message
        sent another way makes this point stale instead of wrong."""
        await self._write([client_history_op(session_id, history, response_id=response_id)])

    async def session_by_client_history(
        self, owner: str, *, history: str | None = None, response_id: str | None = None
    ) -> tuple[str, str] | None:
        """(session id, history hash) of the session of `owner` whose conversation stands
        exactly at `history` (or ended with the answer `response_id`), when nothing was
        added to it since; the most recently updated one when several do (they hold the
        same conversation)."""
        column, value = (
            ("history", history) if response_id is None else ("response_id", response_id)
        )
        if value is None:
            return None
        rows = await self._read(
            "SELECT s.id, h.history FROM client_histories h JOIN sessions s ON s.id = h.session_id "
            f"WHERE h.{column} = ? AND s.owner = ? AND s.message_count = h.messages "
            "ORDER BY s.updated_at DESC LIMIT 1",
            (value, owner),
        )
        return (str(rows[0][0]), str(rows[0][1])) if rows else None


def response_op(session_id: str, key: str, response: str) -> Op:
    """Store the response to a request with an idempotency key (a retry replays it)."""
    return (
        "INSERT INTO idempotency (session_id, key, response, created_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, key) DO UPDATE SET "
        "response = excluded.response WHERE idempotency.response = ?",
        (session_id, key, response, time.time(), STARTED),
    )


def client_history_op(session_id: str, history: str, *, response_id: str | None = None) -> Op:
    """Where an OpenAI-compatible client's conversation stands (see
    `GatewayLog.remember_client_history`), with the session's message count as stored by
    the statements before it in the same transaction."""
    return (
        "INSERT INTO client_histories (session_id, history, response_id, messages) "
        "SELECT id, ?, ?, message_count FROM sessions WHERE id = ? "
        "ON CONFLICT (session_id) DO UPDATE SET history = excluded.history, "
        "response_id = excluded.response_id, messages = excluded.messages",
        (history, response_id, session_id),
    )
