"""The store as one cached session sees it: owner stamping, own-write counting, the head.

The cross-process check compares the store's event count for a session with the count
of events *this process* wrote through the session's sink. Counting every own write as
it is acknowledged is what keeps the check from firing on the agent's own turns (one
project compared against a count taken when the agent was built, and rebuilt the agent
after each of its own writes, every turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stoker.store._sql import Op
from stoker.store.base import SqlEventStore
from stoker.wire.events import Event, MessageAppended, SessionCreated
from stoker.wire.messages import AssistantMessage, UserMessage
from stoker.wire.stored import StoredSession


@dataclass(frozen=True, slots=True, kw_only=True)
class Head:
    """Who owns a session and how many events its log holds."""

    owner: str | None
    events: int


async def read_head(store: SqlEventStore, session_id: str) -> Head:
    """One indexed read of the header row and the log's last sequence number."""
    owner, last = await store.head(session_id)
    return Head(owner=owner, events=last)


class SessionSink:
    """Forwards a session's events to the store, counting the ones for that session.

    It also stamps the gateway's fields (owner, settings) into the session's
    `SessionCreated` config, and hands a session loaded beforehand to `agent.open`
    so a rebuild reads the store once.
    """

    def __init__(
        self,
        store: SqlEventStore,
        session_id: str,
        *,
        written: int,
        stamp: Mapping[str, Any] | None = None,
        loaded: StoredSession | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.written = written  # events in the store for this session, as this process knows
        self._stamp = dict(stamp or {})
        self._loaded = loaded
        self._key: str | None = None
        self._held: list[tuple[Event, str | None]] | None = None  # None: not holding

    def expect(self, idempotency_key: str) -> None:
        """Record `idempotency_key` with the next user message, in its transaction."""
        self._key = idempotency_key

    async def emit(self, event: Event) -> None:
        if self._held is not None:
            await self.emit_many([event])
            return
        event, key = self._stamped(event)
        await self.store.emit(event, idempotency_key=key)
        if event.session_id == self.session_id:
            self.written += 1

    async def emit_many(self, events: Sequence[Event]) -> None:
        """Several events in one transaction (a turn's, at a durability point); a turn's
        answer is held instead while `hold` is on."""
        stamped = [self._stamped(e) for e in events]
        if self._held is not None:
            if any(_is_answer(e) for e, _ in stamped):
                self._held += stamped
                return
            stamped, self._held = [*self._held, *stamped], []
        await self._write(stamped)

    def hold(self) -> None:
        """From now on, keep the batch that holds the turn's answer instead of writing it:
        whoever acknowledges the answer writes it with what it writes after the answer,
        in one transaction (`commit_held`), before it acknowledges it. Every other batch
        (the user's message before the provider call, a tool call before it runs) is
        written when it comes, after anything held: nothing is written out of order."""
        self._held = []

    async def commit_held(self, extra: Sequence[Op] = ()) -> None:
        """Write what `hold` kept, with `extra` statements, in one transaction; hold no
        more. With nothing held, `extra` alone."""
        held, self._held = self._held or [], None
        if held:
            await self._write(held, extra)
        elif extra:
            await self.store.write_ops(extra)

    async def _write(
        self, stamped: Sequence[tuple[Event, str | None]], extra: Sequence[Op] = ()
    ) -> None:
        key = next((k for _, k in stamped if k is not None), None)
        await self.store.emit_many([e for e, _ in stamped], idempotency_key=key, extra=extra)
        self.written += sum(1 for e, _ in stamped if e.session_id == self.session_id)

    def _stamped(self, event: Event) -> tuple[Event, str | None]:
        """The event as stored (the gateway's fields in a `SessionCreated`), and the
        idempotency key it carries, if it is the user message one waits for."""
        own = event.session_id == self.session_id
        if own and isinstance(event, SessionCreated) and self._stamp:
            event = replace(event, config={**event.config, **self._stamp})
        key = None
        if own and self._key is not None and _is_user_text(event):
            key, self._key = self._key, None
        return event, key

    async def load(self, session_id: str) -> StoredSession:
        loaded, self._loaded = self._loaded, None
        if loaded is not None and loaded.id == session_id:
            return loaded
        return await self.store.load(session_id)


def _is_answer(event: Event) -> bool:
    """A model's message that calls no tool: what a turn (or its next try) ends with."""
    message = event.message if isinstance(event, MessageAppended) else None
    return isinstance(message, AssistantMessage) and not message.tool_calls


def _is_user_text(event: Event) -> bool:
    message = event.message if isinstance(event, MessageAppended) else None
    return isinstance(message, UserMessage) and bool(message.text)
