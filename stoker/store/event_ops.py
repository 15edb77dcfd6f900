"""An event as the SQL that stores it: the log row, and the session header and indexes it
changes (message counts, the used-tools index, where the session last wrote, the stored
prefix and config). Pure: both backends run the same statements.
"""

from __future__ import annotations

import time
from typing import Any

from stoker.store.codec import dumps, encode
from stoker.wire.events import (
    CacheRecorded,
    ConfigChanged,
    Event,
    HistoryCompacted,
    MessageAppended,
    PrefixRebased,
    SessionCreated,
)
from stoker.wire.messages import AssistantMessage, UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import furthest_long

Op = tuple[str, tuple[Any, ...]]


def write_op(
    session_id: str, key: str, message: int, block: int, *, at: float, furthest: bool
) -> Op:
    """Remember where a prefix last wrote in a session, and when (a later process judges
    by it whether that entry can still be read): its own newest call, as the session
    itself remembers it; or, `furthest`, a fork's anchor at the end of its history, kept
    only if it lies past what the session wrote since."""
    only_past = (
        " WHERE (session_writes.message, session_writes.block) < (excluded.message, excluded.block)"
        if furthest
        else ""
    )
    return (
        "INSERT INTO session_writes (session_id, prefix_key, message, block, at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, prefix_key) DO UPDATE SET "
        f"message = excluded.message, block = excluded.block, at = excluded.at{only_past}",
        (session_id, key, message, block, at),
    )


def hold_op(session_id: str, key: str, message: int, block: int) -> Op:
    """Remember the furthest 1-hour entry on a prefix of a session (a child's anchor, a
    seal, its own 1-hour writes), as `CacheState.held` does."""
    return (
        "INSERT INTO session_holds (session_id, prefix_key, message, block) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (session_id, prefix_key) DO UPDATE SET message = excluded.message, "
        "block = excluded.block WHERE (session_holds.message, session_holds.block) < "
        "(excluded.message, excluded.block)",
        (session_id, key, message, block),
    )


def record_ops(record: CacheRecord) -> list[Op]:
    """What a call tells a later process (see `CacheState.after_refresh`): where the
    prefix last wrote, the furthest 1-hour entry it holds, and the idle gap its turn came
    after. When a turn's call began (a resumed session's idle time counts from the last)
    goes in the header's update with the record (`ops_for`)."""
    sid, key = record.session_id, record.fingerprints.prefix_key
    ops: list[Op] = []
    last = record.breakpoints[-1] if record.breakpoints else None
    if last is not None and last.message is not None:
        ops.append(
            write_op(sid, key, last.message, last.block, at=record.started_at, furthest=False)
        )
    held = furthest_long(record.breakpoints)
    if held is not None and record.usage.read + record.usage.written:
        ops.append(hold_op(sid, key, *held))
    if record.idle_before is not None:
        ops.append(
            (
                "INSERT INTO session_gaps (session_id, seq, seconds) "
                "SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM session_gaps WHERE session_id = ?",
                (sid, record.idle_before, sid),
            )
        )
    return ops


def title(message: UserMessage) -> str:
    """A session's title: its first user message, on one line, cut short."""
    return " ".join(message.prompt.split())[:80]


def ops_for(event: Event, config: dict[str, Any] | None = None, *, header: bool = True) -> list[Op]:
    """The SQL that stores `event`: its row in the log, and what it changes in the
    session's header and indexes (`config` is the stored config a `ConfigChanged` merges
    into; `header=False` leaves message counts to a bulk write)."""
    now = time.time()
    sid = event.session_id
    body = encode(event)  # once: a record's body is also the header's last record
    ops: list[Op] = []
    if isinstance(event, SessionCreated):
        anchor = event.config.get("anchor")
        if event.parent_id is not None and isinstance(anchor, dict):
            parent, key, (message, block) = event.parent_id, anchor["prefix_key"], anchor["at"]
            at = event.created_at
            ops.append(write_op(parent, key, message, block, at=at, furthest=True))
            if anchor.get("ttl", "1h") == "1h":  # a 1-hour anchor: the parent holds it
                ops.append(hold_op(parent, key, message, block))
        ops.append(
            (
                "INSERT INTO sessions (id, root_id, parent_id, role, created_at, updated_at, "
                "model, prefix, config, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    event.config.get("root_id", sid),
                    event.parent_id,
                    event.role,
                    event.created_at,
                    now,
                    event.prefix.params.model,
                    event.prefix.to_json().decode("utf-8"),
                    dumps(event.config),
                    event.config.get("owner"),
                ),
            )
        )
    elif isinstance(event, MessageAppended):
        m = event.message
        named = title(m) if isinstance(m, UserMessage) else ""
        if header:
            ops.append(
                (
                    "UPDATE sessions SET message_count = message_count + ?, updated_at = ?, "
                    "title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?",
                    (1, now, named, sid),
                )
            )
        if isinstance(m, AssistantMessage):
            for name in sorted({c.name for c in m.tool_calls}):
                ops.append(
                    (
                        "INSERT INTO used_tools (session_id, name) VALUES (?, ?) "
                        "ON CONFLICT DO NOTHING",
                        (sid, name),
                    )
                )
    elif isinstance(event, CacheRecorded):
        record = event.record
        # One statement for the header: the record, and when a turn's call began.
        turned = ", last_turn_at = ?" if record.purpose == "turn" else ""
        ops.append(
            (
                "UPDATE sessions SET last_record = ?, declared_break = NULL, updated_at = ?"
                f"{turned} WHERE id = ?",
                (body, now, *((record.started_at,) if turned else ()), sid),
            )
        )
        ops += record_ops(record)
    elif isinstance(event, PrefixRebased):
        ops.append(
            (
                "UPDATE sessions SET prefix = ?, model = ?, declared_break = ?, updated_at = ? "
                "WHERE id = ?",
                (
                    event.prefix.to_json().decode("utf-8"),
                    event.prefix.params.model,
                    event.reason,
                    now,
                    sid,
                ),
            )
        )
    elif isinstance(event, HistoryCompacted):
        # Positions of the old history mean nothing in the new one; its last record
        # described a request the session will never send again.
        ops.append(
            (
                "UPDATE sessions SET message_count = ?, declared_break = ?, "
                "last_record = NULL, updated_at = ? WHERE id = ?",
                (len(event.messages), f"compaction: {event.reason}", now, sid),
            )
        )
        ops.append(("DELETE FROM session_writes WHERE session_id = ?", (sid,)))
        ops.append(("DELETE FROM session_holds WHERE session_id = ?", (sid,)))
    elif isinstance(event, ConfigChanged) and config is not None:
        ops.append(
            (
                "UPDATE sessions SET config = ?, updated_at = ? WHERE id = ?",
                (dumps({**config, **event.changes}), now, sid),
            )
        )
    ops.append(
        (
            "INSERT INTO events (session_id, seq, type, created_at, body) "
            "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM events WHERE session_id = ?",
            (sid, event.type, now, body, sid),
        )
    )
    return ops
