"""The recording proxy's tables: its lineages and every call it forwarded.

A part of the SQL store (both backends), kept apart from the session events because a
proxied conversation is not a Stoker session: its history belongs to the client, which
may edit it, and its requests are recorded as they came, not rebuilt from a prefix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from stoker.store._sql import Op, SqlAccess
from stoker.store.codec import dumps
from stoker.wire.blocks import valid_text
from stoker.wire.exchange import Exchange, LineageSummary
from stoker.wire.record import CacheRecord

_CALL_COLUMNS = (
    "lineage_id, seq, tenant, dialect, path, mode, purpose, model, started_at, duration, "
    "status, stream, messages_from, request, response, record, notes, ideal, error"
)


def _json(value: Any) -> str:
    """`value` as stored JSON. A client may send a lone surrogate (`"\\ud800"`), which
    has no UTF-8 form: such a value is stored with JSON escapes, which read back the
    same, where everything else keeps its characters."""
    text = dumps(value)
    return text if valid_text(text) is text else json.dumps(value, separators=(",", ":"))


def _ops(exchange: Exchange) -> list[Op]:
    e = exchange
    return [
        (
            "INSERT INTO proxy_lineages (id, parent_id, tenant, dialect, model, created_at, "
            "updated_at, calls, title) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?) "
            "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, "
            "calls = proxy_lineages.calls + 1, model = excluded.model, "
            "title = CASE WHEN proxy_lineages.title = '' THEN excluded.title "
            "ELSE proxy_lineages.title END",
            (
                e.lineage_id,
                e.parent_id,
                e.tenant,
                e.dialect,
                e.model,
                e.started_at,
                e.started_at + e.duration,
                valid_text(e.title),
            ),
        ),
        (
            f"INSERT INTO proxy_calls ({_CALL_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                e.lineage_id,
                e.seq,
                e.tenant,
                e.dialect,
                e.path,
                e.mode,
                e.purpose,
                e.model,
                e.started_at,
                e.duration,
                e.status,
                int(e.stream),
                e.messages_from,
                _json(e.request),
                _json(e.response) if e.response is not None else None,
                _json(e.record.to_dict()) if e.record is not None else None,
                valid_text(e.notes_json()),
                e.ideal,
                valid_text(e.error) if e.error is not None else None,
            ),
        ),
    ]


def _exchange(row: tuple[Any, ...], parent: str | None, title: str) -> Exchange:
    (
        lineage_id,
        seq,
        tenant,
        dialect,
        path,
        mode,
        purpose,
        model,
        started_at,
        duration,
        status,
        stream,
        messages_from,
        request,
        response,
        record,
        notes,
        ideal,
        error,
    ) = row
    parsed = json.loads(notes)
    return Exchange(
        lineage_id=lineage_id,
        seq=int(seq),
        tenant=tenant,
        dialect=dialect,
        path=path,
        mode=mode,
        purpose=purpose,
        model=model,
        started_at=float(started_at),
        duration=float(duration),
        status=int(status),
        stream=bool(stream),
        parent_id=parent,
        title=title,
        messages_from=int(messages_from),
        request=json.loads(request),
        response=json.loads(response) if response is not None else None,
        record=CacheRecord.from_dict(json.loads(record)) if record is not None else None,
        rewrites=tuple(parsed.get("rewrites", ())),
        cannot_fix=tuple(parsed.get("cannot_fix", ())),
        ideal=int(ideal),
        sent_before=int(parsed.get("sent_before", 0)),
        error=error,
    )


class ProxyLog(SqlAccess):
    """What the SQL store offers the proxy: write one exchange, read lineages back.

    Mixed into `SqlEventStore`, whose `_write` and `_read` it uses.
    """

    async def record_exchange(self, exchange: Exchange) -> None:
        """Commit one proxied call (and its lineage's row) in one transaction."""
        await self._write(_ops(exchange))

    async def record_exchanges(self, exchanges: Sequence[Exchange]) -> None:
        """Commit several in one transaction: the proxy's writer batches what queued up."""
        ops: list[Op] = []
        for exchange in exchanges:
            ops += _ops(exchange)
        if ops:
            await self._write(ops)

    async def proxy_lineages(self, *, limit: int = 100) -> list[LineageSummary]:
        """Lineages, most recently used first."""
        rows = await self._read(
            "SELECT id, parent_id, tenant, dialect, model, created_at, updated_at, calls, title "
            "FROM proxy_lineages ORDER BY updated_at DESC, id LIMIT ?",
            (limit,),
        )
        return [
            LineageSummary(
                id=r[0],
                parent_id=r[1],
                tenant=r[2],
                dialect=r[3],
                model=r[4],
                created_at=float(r[5]),
                updated_at=float(r[6]),
                calls=int(r[7]),
                title=r[8],
            )
            for r in rows
        ]

    async def proxy_calls(self, lineage_id: str) -> list[Exchange]:
        """Every call of one lineage, in order (each with its lineage's parent and title)."""
        lineage = await self._read(
            "SELECT parent_id, title FROM proxy_lineages WHERE id = ?", (lineage_id,)
        )
        parent, title = lineage[0] if lineage else (None, "")
        rows = await self._read(
            f"SELECT {_CALL_COLUMNS} FROM proxy_calls WHERE lineage_id = ? ORDER BY seq",
            (lineage_id,),
        )
        return [_exchange(r, parent, title) for r in rows]
