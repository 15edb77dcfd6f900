"""Lineages of proxied calls, told apart by the hash chain of their messages.

A framework resends its whole history on every call, so the calls of one conversation
extend each other message for message. Each call's history is indexed by its chain hash
(`stoker.wire.fingerprint.chain_step`, the same chain Stoker's records keep) at the
length it was sent; a new call finds the longest of its own chain prefixes in the index:

- it extends the latest call of that lineage: the conversation continues (a resume from
  another process is the same: the history is resent as it was);
- it extends an earlier point of a lineage: a fork, a new lineage with that parent;
- nothing: a new conversation.

No time window, no guess: two conversations interleaved with the same system prompt
part at their first differing message. A lineage never crosses a wire (Messages, Chat
Completions, Responses) or a model family (Claude, GPT, ...): a call to another provider's
model with the same history is another conversation, since no cache is shared between
them and a "model changed" miss there is nothing a client could fix. The chain leaves
the system prompt and tools out on purpose, so a conversation whose system prompt
carries a timestamp stays one lineage and its records name the moving byte instead of
splitting it into many.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from stoker.cache.models import fallback_info, model_info
from stoker.cache.planner import BlockRef
from stoker.cache.robust import Account
from stoker.errors import ConfigError
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import Message, UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request

MAX_LINEAGES = 10_000  # the in-memory index keeps the most recently used


@dataclass(slots=True, kw_only=True)
class LineageState:
    """What the proxy remembers of one lineage between its calls (in memory only).

    `auth` holds the client's credential headers so a keep-warm ping reaches the same
    account; it is never stored or logged and goes when the lineage is forgotten.
    """

    id: str
    tenant: str
    dialect: str
    parent_id: str | None = None
    title: str = ""
    seq: int = 0  # calls recorded so far
    count: int = 0  # messages in the latest call
    previous: Request | None = None  # the latest call as sent upstream
    previous_started_at: float | None = None
    previous_written: int | None = None
    previous_cached: int | None = None
    rolling: BlockRef | None = None  # where the latest optimized call wrote
    tool_order: tuple[str, ...] | None = None  # optimize: the first order the client sent
    # optimize: the tools the last call sent, as the client wrote them and as rewritten,
    # the rewrite's notes, and the rewritten tools' bytes (a framework resends the same
    # list every call)
    tools_memo: tuple[list[Any], tuple[Any, ...], tuple[str, ...], tuple[bytes, ...]] | None = None
    cache_key: str | None = None  # optimize (OpenAI): the lineage's prompt_cache_key
    cache_slot: str | None = None  # and the slot (scope/shard) it was made for
    last_payload: dict[str, Any] | None = None  # optimize: the latest body sent upstream
    last_answer: list[Any] | None = None  # optimize (Anthropic): the content answered to it
    answer_tokens: int = 0  # its output tokens as reported: what a seal writes
    path: str = ""
    origin: str = ""  # in process: the scheme, host and port the client sent to
    auth: list[tuple[str, str]] = field(default_factory=list, repr=False)
    refreshed_at: float | None = None  # start of the latest call that read or wrote
    live_for: float = 300.0  # how long that call left the entry alive
    gaps: list[float] = field(default_factory=list)  # seconds between its turn calls
    warm_spent: float = 0.0  # keep-warm spent in the current gap, base-input tokens
    account: Account = field(default_factory=Account)  # its gaps against foresight so far
    since_turn: tuple[CacheRecord, ...] = ()  # its records since its latest turn call


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where a call was placed, as plain data: a recorder in another process follows it,
    so both sides agree on every lineage without either guessing the other's order.
    `ping`: a keep-warm request of the lineage, never a step of its conversation."""

    lineage_id: str
    parent_id: str | None
    new: bool
    shared: int
    ping: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """A call's place: its lineage, and what its explanation compares it with."""

    lineage: LineageState
    seq: int
    new: bool  # the first call of its lineage
    shared: int  # leading messages it shares with the previous call of its lineage
    previous: Request | None
    previous_started_at: float | None
    ping: bool = False

    @property
    def placement(self) -> Placement:
        lineage = self.lineage
        return Placement(
            lineage_id=lineage.id,
            parent_id=lineage.parent_id,
            new=self.new,
            shared=self.shared,
            ping=self.ping,
        )


def chain_hashes(messages: tuple[Message, ...]) -> list[str]:
    """The chain hash after each message: `[h(m0), h(m0, m1), ...]`."""
    out, h = [], EMPTY_CHAIN
    for message in messages:
        h = chain_step(h, message)
        out.append(h)
    return out


def family_of(model: str, dialect: str) -> str:
    """Whose cache `model` uses: the model table's family, or the wire's provider for a
    model it does not know."""
    try:
        return model_info(model).provider
    except ConfigError:
        return fallback_info(model, "anthropic" if dialect == "anthropic" else "openai").provider


def _title(messages: tuple[Message, ...]) -> str:
    for message in messages:
        text = message.prompt if isinstance(message, UserMessage) else ""
        if text:
            return " ".join(text.split())[:80]
    return ""


class LineageIndex:
    """Every lineage's chain points, per tenant, and the lineages' states (bounded LRU)."""

    def __init__(self, *, capacity: int = MAX_LINEAGES) -> None:
        self._capacity = capacity
        self._lineages: OrderedDict[str, LineageState] = OrderedDict()
        # (tenant, wire, model family, chain) -> (lineage, messages): where a history was
        self._points: dict[tuple[str, str, str, str], tuple[str, int]] = {}

    def get(self, lineage_id: str) -> LineageState | None:
        return self._lineages.get(lineage_id)

    def lineages(self) -> list[LineageState]:
        return list(self._lineages.values())

    def admit(
        self,
        tenant: str,
        dialect: str,
        request: Request,
        *,
        at: float,
        placement: Placement | None = None,
    ) -> Admission:
        """Place a call in its lineage (made if new) and move the lineage's head to it;
        where `placement` says, when another index placed it first."""
        hashes = chain_hashes(request.messages)
        space = (tenant, dialect, family_of(request.prefix.params.model, dialect))
        found: tuple[LineageState, int] | None = None
        if placement is None:
            for k in range(len(hashes), 0, -1):
                point = self._points.get((*space, hashes[k - 1]))
                if point is not None and point[0] in self._lineages:
                    found = (self._lineages[point[0]], k)
                    break
            continues = found is not None and found[0].count == found[1]
            continues = continues and found is not None and found[0].dialect == dialect
        else:
            own = self._lineages.get(placement.lineage_id)
            continues = own is not None and not placement.new
            if continues and own is not None:
                found = (own, placement.shared)
            elif placement.parent_id is not None and placement.parent_id in self._lineages:
                found = (self._lineages[placement.parent_id], placement.shared)
        if continues and found is not None:
            lineage, shared = found
            self._lineages.move_to_end(lineage.id)
            admission = Admission(
                lineage=lineage,
                seq=lineage.seq,
                new=False,
                shared=shared,
                previous=lineage.previous,
                previous_started_at=lineage.previous_started_at,
            )
        else:
            parent, shared = found if found is not None else (None, 0)
            given = placement.lineage_id if placement is not None else None
            lineage = self._new(tenant, dialect, hashes, at, parent, given)
            previous = None
            if parent is not None and parent.previous is not None:
                # A fork is explained against the history it shares with its parent: what
                # it can read of the parent's cache, not a break at the point it parts.
                previous = Request(
                    prefix=parent.previous.prefix, messages=parent.previous.messages[:shared]
                )
            admission = Admission(
                lineage=lineage,
                seq=0,
                new=True,
                shared=shared,
                previous=previous,
                previous_started_at=parent.previous_started_at if parent else None,
            )
            lineage.title = _title(request.messages)
        lineage.seq += 1
        lineage.count = len(hashes)
        if hashes:
            self._points[(*space, hashes[-1])] = (lineage.id, len(hashes))
        return admission

    def admit_ping(self, lineage: LineageState) -> Admission:
        """A keep-warm request's place: its lineage's head, which it does not move."""
        admission = Admission(
            lineage=lineage,
            seq=lineage.seq,
            new=False,
            shared=lineage.count,
            previous=lineage.previous,
            previous_started_at=lineage.refreshed_at,
            ping=True,
        )
        lineage.seq += 1
        return admission

    def _new(
        self,
        tenant: str,
        dialect: str,
        hashes: list[str],
        at: float,
        parent: LineageState | None,
        lineage_id: str | None = None,
    ) -> LineageState:
        if lineage_id is None:
            seed = f"{tenant}|{dialect}|{hashes[0] if hashes else ''}|{at!r}|{len(self._lineages)}"
            lineage_id = "pl_" + hashlib.sha256(seed.encode()).hexdigest()[:16]
        lineage = LineageState(
            id=lineage_id,
            tenant=tenant,
            dialect=dialect,
            parent_id=parent.id if parent else None,
        )
        if parent is not None:  # a fork sends what its parent sends
            lineage.tool_order = parent.tool_order
            lineage.cache_key = parent.cache_key
            lineage.cache_slot = parent.cache_slot
            lineage.rolling = parent.rolling
        self._lineages[lineage_id] = lineage
        while len(self._lineages) > self._capacity:
            self._lineages.popitem(last=False)
        return lineage
