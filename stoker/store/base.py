"""The `SessionStore` contract and the SQL logic both backends share.

A store is an `EventSink`: each event is committed in its own transaction before `emit`
returns, so an acknowledged event survives a crash. Alongside the log it keeps, per
session, a header row (current prefix, config, last cache record) and a used-tools
index, so resume reads a constant number of rows to reconcile, never the log.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

from stoker.errors import StoreError
from stoker.store._sql import Op
from stoker.store.event_ops import ops_for, title
from stoker.store.fleet_log import FleetLog
from stoker.store.gateway_log import STARTED, GatewayLog
from stoker.store.platform_log import PlatformLog
from stoker.store.proxy_log import ProxyLog
from stoker.store.schema import LATEST, MIGRATIONS, VERSION_TABLE
from stoker.wire.events import (
    ConfigChanged,
    Event,
    MessageAppended,
)
from stoker.wire.messages import Message, UserMessage, message_from_dict
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.stored import SessionSummary, StoredSession


@dataclass(slots=True)
class StoreStats:
    """Counts every statement sent, so tests can prove what a code path does not read."""

    queries: int = 0
    statements: list[str] = field(default_factory=list)
    trace: bool = False

    def note(self, sql: str) -> None:
        self.queries += 1
        if self.trace:
            self.statements.append(" ".join(sql.split()))


class SessionStore(Protocol):
    stats: StoreStats

    async def emit(self, event: Event) -> None: ...
    async def emit_many(self, events: Sequence[Event]) -> None: ...
    async def load(self, session_id: str) -> StoredSession: ...
    async def list_sessions(self, *, limit: int = 50) -> list[SessionSummary]: ...
    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[tuple[int, str, float, str]]: ...
    async def delete(self, session_id: str) -> bool: ...
    async def close(self) -> None: ...


class SqlEventStore(ProxyLog, PlatformLog, GatewayLog, FleetLog):
    """Event-to-SQL logic shared by the SQLite and PostgreSQL backends (and the recording
    proxy's tables, `ProxyLog`; the chat platforms', `PlatformLog`; the replicas' fleet
    notes, `FleetLog`).

    Backends implement `_write(ops)` (one transaction), `_read(sql, params)`, `_init()`
    and `close()`.
    """

    stats: StoreStats
    _locks: dict[str, asyncio.Lock]

    async def _raw_write(self, ops: Sequence[Op]) -> None:
        raise NotImplementedError

    async def _raw_read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def _write(self, ops: Sequence[Op]) -> None:
        await self._ensure()
        await self._raw_write(ops)

    async def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        await self._ensure()
        return await self._raw_read(sql, params)

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- schema --------------------------------------------------------------------------

    def _migration_ops(self, current: int) -> list[Op]:
        if current > LATEST:
            raise StoreError(
                f"this database has schema version {current}, newer than this Stoker knows "
                f"({LATEST}); upgrade stoker, or point STOKER_DB at another file"
            )
        ops: list[Op] = []
        for m in MIGRATIONS:
            if m.version > current:
                ops += [(s, ()) for s in m.statements]
                ops.append(
                    (
                        "INSERT INTO stoker_schema (version, name, applied_at) VALUES (?, ?, ?)",
                        (m.version, m.name, time.time()),
                    )
                )
        return ops

    _ready: bool
    _init_lock: asyncio.Lock

    async def _ensure(self) -> None:
        """Migrate once, on first use (opening a store does no I/O); concurrent first
        callers wait for the one migration instead of racing ahead of it."""
        if self._ready:
            return
        async with self._init_lock:
            if not self._ready:
                await self._migrate()
                self._ready = True

    async def _migrate(self) -> None:
        await self._raw_write([(VERSION_TABLE, ())])
        rows = await self._raw_read("SELECT MAX(version) FROM stoker_schema")
        current = rows[0][0] or 0
        ops = self._migration_ops(current)
        if ops:
            await self._raw_write(ops)

    async def schema_version(self) -> int:
        rows = await self._read("SELECT MAX(version) FROM stoker_schema")
        return int(rows[0][0] or 0)

    # -- writes ----------------------------------------------------------------------------

    def _ops(
        self, event: Event, config: dict[str, Any] | None = None, *, header: bool = True
    ) -> list[Op]:
        return ops_for(event, config, header=header)

    async def _config(self, session_id: str) -> dict[str, Any]:
        row = await self._session_row("SELECT config FROM sessions WHERE id = ?", session_id)
        return json.loads(row[0])  # type: ignore[no-any-return]

    async def emit(self, event: Event, *, idempotency_key: str | None = None) -> None:
        """Commit one event; when this returns, the event is durable.

        With `idempotency_key` (the user message of a retryable request), the key is
        recorded as started in the same transaction: a retry after a crash or a failed
        turn then finds it and finishes that turn instead of sending the text again.
        """
        config = await self._config(event.session_id) if isinstance(event, ConfigChanged) else None
        ops = self._ops(event, config)
        if idempotency_key is not None:
            ops.append(
                (
                    "INSERT INTO idempotency (session_id, key, response, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (event.session_id, idempotency_key, STARTED, time.time()),
                )
            )
        await self._write(ops)

    async def emit_many(
        self,
        events: Sequence[Event],
        *,
        idempotency_key: str | None = None,
        extra: Sequence[Op] = (),
    ) -> None:
        """Commit several events in one transaction (a turn's, bulk imports, benchmarks),
        with the `extra` statements after them (what the gateway keeps of an answer:
        `GatewayLog.response_op`, `client_history_op`); when this returns, all of it is
        durable.

        Message counts are added once per session: updating one row thousands of times
        in a transaction makes each update slower on PostgreSQL (row version chains).
        With `idempotency_key`, as `emit`, for the session of the first user message.
        """
        ops: list[Op] = []
        counts: dict[str, list[Any]] = {}
        for e in events:
            config = await self._config(e.session_id) if isinstance(e, ConfigChanged) else None
            ops += self._ops(e, config, header=not isinstance(e, MessageAppended))
            if isinstance(e, MessageAppended):
                entry = counts.setdefault(e.session_id, [0, ""])
                entry[0] += 1
                if not entry[1] and isinstance(e.message, UserMessage):
                    entry[1] = title(e.message)
        now = time.time()
        for sid, (count, first) in counts.items():
            ops.append(
                (
                    "UPDATE sessions SET message_count = message_count + ?, updated_at = ?, "
                    "title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?",
                    (count, now, first, sid),
                )
            )
        if idempotency_key is not None:
            keyed = next(e for e in events if isinstance(e, MessageAppended))
            ops.append(
                (
                    "INSERT INTO idempotency (session_id, key, response, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (keyed.session_id, idempotency_key, STARTED, time.time()),
                )
            )
        await self._write([*ops, *extra])

    async def write_ops(self, ops: Sequence[Op]) -> None:
        """Statements the store's parts build (`GatewayLog.response_op`, ...), in one
        transaction."""
        await self._write(ops)

    # -- reads -------------------------------------------------------------------------------

    async def load(self, session_id: str) -> StoredSession:
        """Header, messages and used tools: three queries, whatever the log's length.

        A fork (a review, a sub-agent) stores only its own messages and the point it was
        forked at; its history starts with its parent's first messages up to that point,
        read the same way (three more queries per level of forking). A compaction
        replaces the history from its event on; a fork made before it reads the parent's
        history as it was then (the `epoch` it stored: compactions the parent had made).
        """
        return await self._load(session_id, epoch=None)

    async def _load(self, session_id: str, *, epoch: int | None) -> StoredSession:
        row = await self._session_row(
            "SELECT role, parent_id, root_id, created_at, prefix, config, last_record, "
            "declared_break, last_turn_at FROM sessions WHERE id = ?",
            session_id,
        )
        role, parent_id, root_id, created_at, prefix, config, last_record, pending, turned = row
        settings = json.loads(config)
        messages, used, epochs = await self._own_messages(session_id, epoch=epoch)
        writes = await self._read(
            "SELECT prefix_key, message, block, at FROM session_writes WHERE session_id = ?",
            (session_id,),
        )
        holds = await self._read(
            "SELECT prefix_key, message, block FROM session_holds WHERE session_id = ?",
            (session_id,),
        )
        gaps = await self._read(
            "SELECT seconds FROM session_gaps WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        forked_at = settings.get("forked_at")
        if parent_id is not None and isinstance(forked_at, int):
            parent_epoch = settings.get("epoch")
            parent = await self._load(
                parent_id, epoch=parent_epoch if isinstance(parent_epoch, int) else None
            )
            messages = (*parent.messages[:forked_at], *messages)
            used |= parent.used_tools
        return StoredSession(
            id=session_id,
            role=role,
            parent_id=parent_id,
            root_id=root_id,
            created_at=created_at,
            prefix=Prefix.from_json(prefix),
            config=settings,
            messages=messages,
            used_tools=used,
            last_record=CacheRecord.from_dict(json.loads(last_record)) if last_record else None,
            declared_break=pending,
            writes={key: (int(m), int(b)) for key, m, b, _ in writes},
            written_at={key: float(at) for key, _, _, at in writes if at is not None},
            holds={key: (int(m), int(b)) for key, m, b in holds},
            gaps=tuple(float(g) for (g,) in gaps),
            last_turn_at=turned,
            epoch=epochs,
        )

    async def _own_messages(
        self, session_id: str, *, epoch: int | None
    ) -> tuple[tuple[Message, ...], frozenset[str], int]:
        """The session's own history after its last compaction (after `epoch` of them,
        up to the next, when given), its used tools, and how many compactions it made."""
        rows = await self._read(
            "SELECT type, body FROM events WHERE session_id = ? "
            "AND type IN ('message_appended', 'history_compacted') ORDER BY seq",
            (session_id,),
        )
        tools = await self._read("SELECT name FROM used_tools WHERE session_id = ?", (session_id,))
        cuts = [i for i, (type_, _) in enumerate(rows) if type_ == "history_compacted"]
        wanted = len(cuts) if epoch is None else min(epoch, len(cuts))
        start = cuts[wanted - 1] if wanted else 0
        end = cuts[wanted] if wanted < len(cuts) else len(rows)
        messages: list[Message] = []
        for type_, body in rows[start:end]:  # only the epoch's rows are decoded
            data = json.loads(body)
            if type_ == "history_compacted":
                messages = [message_from_dict(m) for m in data["messages"]]
            else:
                messages.append(message_from_dict(data["message"]))
        return tuple(messages), frozenset(name for (name,) in tools), len(cuts)

    async def list_sessions(
        self,
        *,
        limit: int = 50,
        owner: str | None = None,
        role: str | None = None,
        owned: bool = False,
    ) -> list[SessionSummary]:
        """Most recently updated first; `owner`/`role` filter (the gateway lists a user's).
        `owned`: only sessions some gateway user owns (a gateway's own, never the CLI's)."""
        where, params = [], []
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        if owned:
            where.append("owner IS NOT NULL")
        if role is not None:
            where.append("role = ?")
            params.append(role)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        rows = await self._read(
            "SELECT id, role, parent_id, created_at, updated_at, model, message_count, title "
            f"FROM sessions {clause}ORDER BY updated_at DESC LIMIT ?",
            (*params, limit),
        )
        return [
            SessionSummary(
                id=r[0],
                role=r[1],
                parent_id=r[2],
                created_at=r[3],
                updated_at=r[4],
                model=r[5],
                message_count=r[6],
                title=r[7],
            )
            for r in rows
        ]

    async def idle_gaps(self, *, besides: str = "", limit: int = 256) -> tuple[float, ...]:
        """The idle gaps the store's main sessions (but `besides`) showed between turns
        (seconds), the most recently active sessions' first: how this store's users come
        back, which the time policy learns from (`stoker.cache.learned`)."""
        rows = await self._read(
            "SELECT g.seconds FROM session_gaps g JOIN sessions s ON s.id = g.session_id "
            "WHERE s.role = 'main' AND s.id <> ? ORDER BY s.updated_at DESC, g.seq DESC "
            "LIMIT ?",
            (besides, limit),
        )
        return tuple(float(g) for (g,) in rows)

    async def session_ids(self, prefix: str = "") -> list[str]:
        """Every session id that starts with `prefix` (case-sensitive on every backend:
        SQLite's LIKE is not), in no particular order."""
        rows = await self._read(
            "SELECT id FROM sessions WHERE substr(id, 1, CAST(? AS INTEGER)) = ?",
            (len(prefix), prefix),
        )
        return [str(r[0]) for r in rows]

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[tuple[int, str, float, str]]:
        """A session's events in order, (seq, type, created_at, JSON body): every one, or
        the first `limit` after event number `after` (a reader following the log)."""
        await self._config(session_id)
        rows = await self._read(
            "SELECT seq, type, created_at, body FROM events WHERE session_id = ? AND seq > ? "
            "ORDER BY seq" + (" LIMIT ?" if limit is not None else ""),
            (session_id, after) if limit is None else (session_id, after, limit),
        )
        return [(int(a), str(b), float(c), str(d)) for a, b, c, d in rows]

    def session_lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Serializes turns of one session. In-process here; PostgreSQL adds an advisory
        lock so two replicas never run the same session at once."""
        return self._local_lock(session_id)

    @asynccontextmanager
    async def _local_lock(self, session_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            yield

    async def children(self, session_id: str) -> list[str]:
        rows = await self._read("SELECT id FROM sessions WHERE parent_id = ?", (session_id,))
        return [r[0] for r in rows]

    async def delete(self, session_id: str) -> bool:
        """Delete a session and its child lineages (forks, reviews, branches)."""
        doomed, queue = [], [session_id]
        while queue:
            sid = queue.pop()
            doomed.append(sid)
            queue += await self.children(sid)
        existed = bool(await self._read("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))
        ops: list[Op] = []
        for sid in doomed:
            for table, col in (
                ("events", "session_id"),
                ("used_tools", "session_id"),
                ("session_writes", "session_id"),
                ("session_holds", "session_id"),
                ("session_gaps", "session_id"),
                ("client_histories", "session_id"),
                ("platform_chats", "session_id"),
                ("sessions", "id"),
            ):
                ops.append((f"DELETE FROM {table} WHERE {col} = ?", (sid,)))
        await self._write(ops)
        return existed
