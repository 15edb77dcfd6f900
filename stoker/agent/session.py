"""A live conversation: the frozen prefix, the append-only history, and its cache records.

A `Session` owns what the agent has said; the `Agent` only says what it is. Forks copy
the prefix object and a snapshot of the history, so what a fork sends is the parent's
bytes plus its instruction, by construction. The prefix changes only through `rebase`,
which records the break as declared.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from stoker.agent.loop import TurnResult, run_turn
from stoker.cache.keys import lineage_cache_key
from stoker.cache.planner import BlockRef, plan
from stoker.cache.record import build_record, notify
from stoker.providers.base import CallContext, Completion
from stoker.tools import DispatchPolicy, Tool, ToolContext
from stoker.wire.events import (
    CacheRecorded,
    Event,
    EventSink,
    MemorySink,
    MessageAppended,
    PrefixRebased,
    SessionCreated,
)
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import Message, UserMessage, user_text
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from stoker.wire.usage import Usage

if TYPE_CHECKING:
    from stoker.agent.agent import Agent
    from stoker.tools import ToolProgress


class _Inherit:
    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Any = _Inherit()
"""Sentinel for fork arguments: keep the parent's value (distinct from None, which clears)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Callbacks:
    """Per-run hooks, swappable between turns without rebuilding anything."""

    on_text: Callable[[str], object] | None = None
    on_tool: Callable[[ToolProgress], object] | None = None
    on_status: Callable[[str], object] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebase:
    """A deliberate prefix change for a fork or a session, recorded as a declared break."""

    reason: str
    tools: tuple[Tool, ...] | None = None
    system: str | None = None
    model: str | None = None


class Session:
    """One conversation lineage. Create with `agent.session()`; fork with `fork()`."""

    def __init__(
        self,
        *,
        agent: Agent,
        session_id: str,
        prefix: Prefix,
        history: list[Message],
        sink: EventSink,
        kind: str = "main",
        parent: Session | None = None,
        policy: DispatchPolicy | None = None,
        max_iterations: int | None = None,
    ) -> None:
        self.agent = agent
        self.id = session_id
        self.prefix = prefix
        self.kind = kind
        self.parent = parent
        self.root_id: str = parent.root_id if parent else session_id
        self.policy = policy or DispatchPolicy()
        self.max_iterations = max_iterations or agent.max_iterations
        self.callbacks = Callbacks()
        self.records: list[CacheRecord] = []
        self.sink = sink
        self._history = history
        # Hash chain over the history (records stay O(new messages)) and the lineage's
        # incremental render memo; a fork starts from copies of the parent's.
        self._chain: list[str] = list(parent._chain) if parent else []
        self._render_memo: dict[str, Any] = (
            {k: (n, list(items), last) for k, (n, items, last) in parent._render_memo.items()}
            if parent
            else {}
        )
        self._recorded_upto = (
            len(parent._last_request.messages) if parent and parent._last_request else 0
        )
        self._lock = asyncio.Lock()
        self._pending: list[Event] = []
        self._declared: str | None = None
        self._last_request: Request | None = parent._last_request if parent else None
        self._last_started: float | None = parent._last_started if parent else None
        self._rolling: BlockRef | None = parent._rolling if parent else None
        self._last_written: int | None = parent._last_written if parent else None
        self._instruction: str | None = None
        self._tools = self._implementations(prefix)

    @classmethod
    def create(cls, agent: Agent, *, session_id: str | None, sink: EventSink | None) -> Session:
        session = cls(
            agent=agent,
            session_id=session_id or uuid.uuid4().hex,
            prefix=agent.build_prefix(),
            history=[],
            sink=sink or MemorySink(),
        )
        session._pending.append(
            SessionCreated(
                session_id=session.id,
                prefix=session.prefix,
                config={"agent_kind": agent.kind, "provider": agent.provider.name},
                created_at=agent.clock.now(),
            )
        )
        return session

    def _implementations(self, prefix: Prefix) -> dict[str, Tool]:
        # Only advertised tools can run; an implementation the prefix does not send is unknown.
        advertised = set(prefix.tool_names)
        return {t.name: t for t in self.agent.resolved_tools() if t.name in advertised}

    # -- state --------------------------------------------------------------------------

    @property
    def history(self) -> tuple[Message, ...]:
        return tuple(self._history)

    @property
    def usage(self) -> Usage:
        return sum((r.usage for r in self.records), Usage())

    @property
    def cost_usd(self) -> float | None:
        costs = [r.cost_usd for r in self.records]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def tools(self) -> dict[str, Tool]:
        return self._tools

    async def _emit(self, event: Event) -> None:
        self._pending.append(event)
        await self._flush()

    async def _flush(self) -> None:
        # Creation events are queued (constructors cannot await) and go out first.
        pending, self._pending = self._pending, []
        for e in pending:
            await self.sink.emit(e)

    async def append(self, message: Message) -> None:
        """Append to history; acknowledged once the sink has it."""
        self._history.append(message)
        self._chain.append(chain_step(self._chain[-1] if self._chain else EMPTY_CHAIN, message))
        await self._emit(
            MessageAppended(session_id=self.id, index=len(self._history) - 1, message=message)
        )

    # -- one provider call ----------------------------------------------------------------

    def build_request(self, *, stream: bool = False) -> Request:
        info = self.agent.provider.model_info(self.prefix.params.model)
        p = plan(info, self._history, previous=self._rolling, policy=self.agent.cache_policy)
        return Request(
            prefix=self.prefix,
            messages=tuple(self._history),
            max_tokens=self.agent.max_tokens,
            breakpoints=p.breakpoints,
            cache_key=lineage_cache_key(self.root_id) if info.provider == "openai" else None,
            stream=stream,
            render_memo=self._render_memo,
        )

    async def call_model(self) -> tuple[Completion, CacheRecord]:
        """One provider call on the current history, recorded and explained."""
        request = self.build_request(stream=self.callbacks.on_text is not None)
        info = self.agent.provider.model_info(self.prefix.params.model)
        completion = await self.agent.provider.complete(
            request, CallContext(lineage=self.id, on_text=self.callbacks.on_text)
        )
        policy = self.agent.cache_policy
        record = build_record(
            lineage=self.id,
            seq=len(self.records),
            kind=self.kind,
            provider=self.agent.provider.name,
            info=info,
            request=request,
            previous=self._last_request,
            previous_started_at=self._last_started,
            previous_written=self._last_written,
            started_at=completion.started_at,
            usage=completion.usage,
            history=self._chain[-1] if self._chain else EMPTY_CHAIN,
            new_from=self._recorded_upto,
            retries=completion.retries,
            facts=completion.facts,
            declared=self._declared,
            ttl_seconds=300.0 if policy.message_ttl == "5m" else 3600.0,
        )
        self._declared = None
        self._last_request = request
        self._last_started = completion.started_at
        self._last_written = record.usage.written
        self._recorded_upto = len(request.messages)
        if request.breakpoints and request.breakpoints[-1].message is not None:
            last = request.breakpoints[-1]
            self._rolling = (last.message, last.block)
        self.records.append(record)
        notify(record)
        await self._emit(CacheRecorded(session_id=self.id, record=record))
        return completion, record

    def tool_context(self, tool_use_id: str) -> ToolContext:
        return ToolContext(session_id=self.id, tool_use_id=tool_use_id)

    # -- turns ------------------------------------------------------------------------------

    async def send(
        self,
        text: str | UserMessage,
        *,
        note: str | None = None,
        callbacks: Callbacks | None = None,
    ) -> TurnResult:
        """Run one user turn: model, tools, model... until an answer or the budget ends.

        `note` is volatile context (time, recalled memory) sent after the text in this
        message and stored exactly as sent; it never touches the prefix.
        """
        message = text if isinstance(text, UserMessage) else user_text(text, note=note)
        async with self._lock:
            if callbacks is not None:
                self.callbacks = callbacks
            return await run_turn(self, message)

    async def run(self) -> TurnResult:
        """Send a fork's instruction (see `fork`)."""
        if self._instruction is None:
            raise RuntimeError("run() sends a fork's instruction; use send() on a main session")
        instruction, self._instruction = self._instruction, None
        return await self.send(instruction)

    # -- forks and rebases ---------------------------------------------------------------------

    def fork(
        self,
        *,
        instruction: str,
        policy: DispatchPolicy | None = INHERIT,
        kind: str = "fork",
        max_iterations: int | None = None,
        rebase: Rebase | None = None,
        sink: EventSink | None = None,
    ) -> Session:
        """A child that sends exactly this session's prefix and history, plus `instruction`.

        `policy` narrows what the child may call (never what it sends). The child cannot
        send other tools or another system prompt unless `rebase` declares the break.
        """
        narrowed = (
            self.policy if policy is INHERIT or policy is None else self.policy.narrow_to(policy)
        )
        child = Session(
            agent=self.agent,
            session_id=f"{self.id}.{kind}-{uuid.uuid4().hex[:8]}",
            prefix=self.prefix,
            history=list(self._history),
            sink=sink or self.sink,
            kind=kind,
            parent=self,
            policy=narrowed,
            max_iterations=max_iterations,
        )
        child._instruction = instruction
        child._pending.append(
            SessionCreated(
                session_id=child.id,
                prefix=child.prefix,
                parent_id=self.id,
                kind=kind,
                config={"agent_kind": self.agent.kind, "forked_at": len(self._history)},
                created_at=self.agent.clock.now(),
            )
        )
        if rebase is not None:
            child._apply_rebase(rebase)
        return child

    def _apply_rebase(self, rebase: Rebase) -> None:
        prefix = self.prefix
        if rebase.tools is not None:
            specs = tuple(t.spec_bytes for t in sorted(rebase.tools, key=lambda t: t.name))
            prefix = replace(prefix, tools=specs)
        if rebase.system is not None:
            prefix = replace(prefix, system=rebase.system)
        if rebase.model is not None:
            prefix = prefix.with_params(model=rebase.model)
        self.prefix = prefix
        extra = {t.name: t for t in rebase.tools or ()}
        self._tools = {**self._implementations(prefix), **extra}
        self._declared = rebase.reason
        self._pending.append(PrefixRebased(session_id=self.id, prefix=prefix, reason=rebase.reason))

    async def rebase(self, rebase: Rebase) -> None:
        """Change the prefix on purpose; the next record is a declared break with `reason`."""
        self._apply_rebase(rebase)
        await self._flush()
