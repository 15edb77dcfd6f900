"""A stored lineage tree read back as calls: every provider call of a session and of its
forks, reviews and sub-agents, each with the request it sent rebuilt from the store.

A record keeps fingerprints, not payloads, yet the store keeps every message as sent and
every prefix a session had; so a call's request is the prefix whose key the record names,
the history's first `message_count` messages (and, for a keep-warm, its placeholder,
which the record leaves out) and the record's breakpoints. The record's history hash
checks the rebuild: a call whose messages do not hash to it (a log edited by hand) gets
no request, and is shown but never replayed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stoker.agent.warmth import PLACEHOLDER
from stoker.errors import SessionNotFound, WireError
from stoker.store.base import SqlEventStore
from stoker.store.codec import decode
from stoker.wire.events import (
    CacheRecorded,
    HistoryCompacted,
    MessageAppended,
    PrefixRebased,
    SessionCreated,
)
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step, key_of
from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCall:
    """One provider call as the store kept it; `request` is None when it cannot be rebuilt."""

    record: CacheRecord
    order: tuple[float, float, int]  # started, stored, event number: the calls' time order
    prefix: Prefix | None
    request: Request | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionNode:
    """A session of the tree: its role (main, fork, review, subagent, branch), its parent,
    and its title (the first thing the user asked)."""

    id: str
    role: str
    parent_id: str | None
    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredLineage:
    root_id: str
    sessions: tuple[SessionNode, ...]
    calls: tuple[StoredCall, ...]  # in the order they were made


async def tree_ids(store: SqlEventStore, root_id: str) -> list[str]:
    """`root_id` and every session forked from it, parents before children."""
    out, queue = [], [root_id]
    while queue:
        sid = queue.pop(0)
        out.append(sid)
        queue += sorted(await store.children(sid))
    return out


async def root_of(store: SqlEventStore, session_id: str) -> str:
    """The session at the top of `session_id`'s tree (itself when it has no parent)."""
    stored = await store.load(session_id)
    return stored.root_id or stored.id


async def root_ids(store: SqlEventStore, *, limit: int = 10_000) -> list[str]:
    """Every session that was not forked from another, most recently updated first."""
    return [s.id for s in await store.list_sessions(limit=limit) if s.parent_id is None]


def _is(value: object, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _check(record: CacheRecord) -> None:
    """What the report computes with has the type it needs (a store is a file: anyone
    may have edited it); raises TypeError or ValueError naming the field otherwise."""
    numbers = {"started_at": record.started_at}
    if record.cost_usd is not None:
        numbers["cost_usd"] = record.cost_usd
    for name, value in numbers.items():
        if not _is(value, (int, float)) or not math.isfinite(value):
            raise TypeError(f"{name} is {value!r}, not a number")
    counts = {"seq": record.seq, **record.usage.to_dict()}
    counts["message_count"] = record.fingerprints.message_count
    for name, value in counts.items():
        if not _is(value, int) or value < 0:
            raise ValueError(f"{name} is {value!r}, not a count")
    f, e = record.fingerprints, record.explanation
    texts = [record.model, record.purpose, record.provider, e.verdict, e.detail, f.params]
    texts += [f.system, f.history, *f.tools]
    if not all(isinstance(t, str) for t in texts) or (
        e.slot is not None and not isinstance(e.slot, str)
    ):
        raise TypeError("a text field is not text")
    for b in record.breakpoints:
        if (
            b.ttl not in ("5m", "1h")
            or not _is(b.block, int)
            or not (b.message is None or _is(b.message, int))
        ):
            raise ValueError(f"breakpoint {b!r} is not one a request can carry")


_READ = frozenset(
    {"session_created", "prefix_rebased", "cache_recorded", "message_appended", "history_compacted"}
)


def _history_hash(messages: Sequence[Message]) -> str:
    chain = EMPTY_CHAIN
    for m in messages:
        chain = chain_step(chain, m)
    return chain


def _rebuilt(
    record: CacheRecord, prefixes: dict[str, Prefix], history: Sequence[Message]
) -> Request | None:
    prefix = prefixes.get(record.fingerprints.prefix_key)
    count = record.fingerprints.message_count
    if prefix is None or count > len(history):
        return None
    messages = tuple(history[:count])
    if _history_hash(messages) != record.fingerprints.history:
        return None
    if record.purpose != "turn":  # a ping or seal also sent its placeholder, not kept
        messages = (*messages, PLACEHOLDER)
    return Request(prefix=prefix, messages=messages, breakpoints=record.breakpoints)


async def load_lineage(store: SqlEventStore, root_id: str) -> StoredLineage:
    """Every call of the tree rooted at `root_id`, in the order they were made."""
    sessions: list[SessionNode] = []
    calls: list[StoredCall] = []
    for sid in await tree_ids(store, root_id):
        try:
            stored = await store.load(sid)
        except SessionNotFound:
            continue
        prefixes: dict[str, Prefix] = {}
        title = ""
        # The history as it stood at each call: a compaction replaced it from its event on,
        # so calls made before one were sent the history it replaced.
        forked_at = stored.config.get("forked_at")
        running = list(stored.messages[:forked_at] if isinstance(forked_at, int) else ())
        first: Message | None = None
        for seq, type_, created, body in await store.events(sid):
            if type_ not in _READ:
                continue
            try:
                event = decode(sid, type_, body)
                if isinstance(event, CacheRecorded):
                    _check(event.record)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise WireError(
                    f"session {sid!r}: stored event {seq} ({type_}) does not parse "
                    f"({type(exc).__name__}: {exc}); `stoker sessions export {sid}` shows it"
                ) from exc
            if isinstance(event, MessageAppended):
                running.append(event.message)
                if first is None and event.message.role == "user":
                    first = event.message
            elif isinstance(event, HistoryCompacted):
                running = list(event.messages)
            elif isinstance(event, SessionCreated | PrefixRebased):
                prefixes[key_of(event.prefix)] = event.prefix
            elif isinstance(event, CacheRecorded):
                record = event.record
                prefix = prefixes.get(record.fingerprints.prefix_key)
                calls.append(
                    StoredCall(
                        record=record,
                        order=(record.started_at, created, seq),
                        prefix=prefix,
                        request=_rebuilt(record, prefixes, running)
                        or _rebuilt(record, prefixes, stored.messages),
                    )
                )
        first = first or next((m for m in stored.messages if m.role == "user"), None)
        if first is not None and sid == root_id:
            title = " ".join(getattr(first, "prompt", "").split())[:80]
        sessions.append(
            SessionNode(id=sid, role=stored.role, parent_id=stored.parent_id, title=title)
        )
    calls.sort(key=lambda c: c.order)
    return StoredLineage(root_id=root_id, sessions=tuple(sessions), calls=tuple(calls))
