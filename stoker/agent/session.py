"""A live conversation: the frozen prefix, the append-only history, and its cache records.

A `Session` owns what the agent has said; the `Agent` only says what it is. Forks and
branches copy the prefix object and a snapshot of the history (see `lineage.py`), so
what they send is the parent's bytes plus their own messages, by construction. The
prefix changes only through `rebase`, which records the break as declared.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from stoker.agent import lineage
from stoker.agent.delegate import FanOut
from stoker.agent.lineage import INHERIT, Rebase
from stoker.agent.loop import TurnResult, run_turn
from stoker.agent.resume import ToolsMode
from stoker.agent.review import BackgroundReviews, ReviewOutcome
from stoker.agent.state import CacheState
from stoker.agent.toolkits import ToolkitTracker
from stoker.cache.keys import lineage_cache_key
from stoker.cache.planner import plan
from stoker.cache.pricing import cost_usd, total_cost
from stoker.cache.record import build_record, notify
from stoker.providers.base import CallContext, Completion
from stoker.tools import DispatchPolicy, Tool, ToolContext
from stoker.wire.blocks import TextBlock, ToolResultBlock
from stoker.wire.events import (
    CacheRecorded,
    ConfigChanged,
    Event,
    EventSink,
    MemorySink,
    MessageAppended,
    PrefixRebased,
    SessionCreated,
)
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import AssistantMessage, Message, UserMessage, user_text
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from stoker.wire.stored import SessionSource
from stoker.wire.usage import Usage

if TYPE_CHECKING:
    from stoker.agent.agent import Agent
    from stoker.tools import ToolProgress


@dataclass(frozen=True, slots=True, kw_only=True)
class Callbacks:
    """Per-run hooks, swappable between turns without rebuilding anything."""

    on_text: Callable[[str], object] | None = None
    on_tool: Callable[[ToolProgress], object] | None = None
    on_status: Callable[[str], object] | None = None
    on_review: Callable[[str], object] | None = None  # one summary line per review
    on_review_error: Callable[[BaseException], object] | None = None


DELEGATED = "(handed to a sub-agent; its answer goes to the conversation that asked)"


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
        root_id: str | None = None,
        policy: DispatchPolicy | None = None,
        max_iterations: int | None = None,
        state: CacheState | None = None,
        tools: dict[str, Tool] | None = None,
    ) -> None:
        self.agent = agent
        self.id = session_id
        self.prefix = prefix
        self.kind = kind
        self.parent = parent
        self.root_id: str = root_id or (parent.root_id if parent else session_id)
        self.policy = policy or DispatchPolicy()
        self.max_iterations = max_iterations or agent.max_iterations
        self.callbacks = Callbacks()
        self.records: list[CacheRecord] = []
        self.sink = sink
        self.state = state or CacheState()
        self.instruction: str | None = None  # a fork's pending first message (see run())
        self._history = history
        self._lock = asyncio.Lock()
        self._pending: list[Event] = []
        self.declared: str | None = None
        self._tools = tools if tools is not None else self.implementations(prefix)
        self.fanout = FanOut()
        self.toolkits: ToolkitTracker | None = (
            parent.toolkits.child() if parent is not None and parent.toolkits else None
        ) or (ToolkitTracker(agent.integrations) if agent.integrations else None)
        self.reviews = BackgroundReviews()
        self.on_first_response: Callable[[], object] | None = None

    @classmethod
    def create(cls, agent: Agent, *, session_id: str | None, sink: EventSink | None) -> Session:
        session = cls(
            agent=agent,
            session_id=session_id or uuid.uuid4().hex,
            prefix=agent.build_prefix(),
            history=[],
            sink=sink or MemorySink(),
        )
        session.queue(
            SessionCreated(
                session_id=session.id,
                prefix=session.prefix,
                config={**agent.config_snapshot(), "root_id": session.root_id},
                created_at=agent.clock.now(),
            )
        )
        return session

    def implementations(self, prefix: Prefix) -> dict[str, Tool]:
        """Runtime tools that `prefix` advertises (an unadvertised tool is unknown)."""
        advertised = set(prefix.tool_names)
        return {t.name: t for t in self.agent.resolved_tools() if t.name in advertised}

    # -- state --------------------------------------------------------------------------

    @property
    def history(self) -> tuple[Message, ...]:
        return tuple(self._history)

    @property
    def usage(self) -> Usage:
        return Usage.total(r.usage for r in self.records)

    @property
    def cost_usd(self) -> float | None:
        return total_cost(r.cost_usd for r in self.records)

    @property
    def tools(self) -> dict[str, Tool]:
        return self._tools

    def queue(self, event: Event) -> None:
        """Hold an event until the next emit (constructors cannot await)."""
        self._pending.append(event)

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        for e in pending:
            await self.sink.emit(e)

    async def emit(self, event: Event) -> None:
        self._pending.append(event)
        await self.flush()

    async def append(self, message: Message) -> None:
        """Append to history; acknowledged once the sink has it."""
        self._history.append(message)
        chain = self.state.chain
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, message))
        await self.emit(
            MessageAppended(session_id=self.id, index=len(self._history) - 1, message=message)
        )

    # -- one provider call ----------------------------------------------------------------

    def build_request(self, *, stream: bool = False) -> Request:
        info = self.agent.provider.model_info(self.prefix.params.model)
        p = plan(info, self._history, previous=self.state.rolling, policy=self.agent.cache_policy)
        return Request(
            prefix=self.prefix,
            messages=tuple(self._history),
            max_tokens=self.agent.max_tokens,
            breakpoints=p.breakpoints,
            cache_key=lineage_cache_key(self.root_id) if info.provider == "openai" else None,
            stream=stream,
            render_memo=self.state.render_memo,
        )

    async def call_model(self) -> tuple[Completion, CacheRecord]:
        """One provider call on the current history, recorded and explained."""
        request = self.build_request(stream=self.callbacks.on_text is not None)
        info = self.agent.provider.model_info(self.prefix.params.model)
        completion = await self.agent.provider.complete(
            request, CallContext(lineage=self.id, on_text=self.callbacks.on_text)
        )
        if self.on_first_response is not None:
            self.on_first_response()
            self.on_first_response = None
        state = self.state
        record = build_record(
            lineage=self.id,
            seq=len(self.records),
            kind=self.kind,
            provider=self.agent.provider.name,
            info=info,
            request=request,
            previous=state.last_request,
            previous_started_at=state.last_started,
            previous_written=state.last_written,
            started_at=completion.started_at,
            usage=completion.usage,
            history=state.chain[-1] if state.chain else EMPTY_CHAIN,
            new_from=state.recorded_upto,
            retries=completion.retries,
            facts=completion.facts,
            declared=self.declared,
            ttl_seconds=300.0 if self.agent.cache_policy.message_ttl == "5m" else 3600.0,
        )
        self.declared = None
        state.last_request = request
        state.last_started = completion.started_at
        state.last_written = record.usage.written
        state.last_input_tokens = record.usage.input_total
        state.recorded_upto = len(request.messages)
        if request.breakpoints and (at := request.breakpoints[-1].message) is not None:
            state.rolling = (at, request.breakpoints[-1].block)
        self.records.append(record)
        notify(record)
        await self.emit(CacheRecorded(session_id=self.id, record=record))
        return completion, record

    def tool_context(self, tool_use_id: str) -> ToolContext:
        return ToolContext(
            session_id=self.id,
            tool_use_id=tool_use_id,
            metadata={
                "origin": "background_review" if self.kind == "review" else "foreground",
                "execution_context": self.kind,
                "parent_session_id": self.parent.id if self.parent else None,
                "platform": self.agent.platform,
                "kind": self.kind,
            },
        )

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
        async with self._lock:
            if callbacks is not None:
                self.callbacks = callbacks
            message = await self._user_message(text, note)
            result = await run_turn(self, message)
            if self.agent.review is not None and self.kind == "main":
                self.reviews.after_turn(self, result, self.agent.review)
            return result

    async def _user_message(self, text: str | UserMessage, note: str | None) -> UserMessage:
        """The message as sent: text, then the caller's note, then any toolkit change."""
        toolkit_note = ""
        if self.toolkits is not None:
            toolkit_note = await self.toolkits.turn_note(self.id)
            if toolkit_note:
                fingerprint = self.toolkits.announced.fingerprint
                self.queue(ConfigChanged(session_id=self.id, changes={"toolkit_view": fingerprint}))
        if isinstance(text, UserMessage):
            extra = [TextBlock(text=n) for n in (note, toolkit_note) if n]
            return UserMessage(content=(*text.content, *extra)) if extra else text
        combined = "\n\n".join(n for n in (note, toolkit_note) if n) or None
        return user_text(text, note=combined)

    async def drain(self) -> list[ReviewOutcome]:
        """Wait for the background reviews started since the last drain; oldest first."""
        return await self.reviews.drain()

    async def run(self) -> TurnResult:
        """Send a fork's instruction (see `fork`).

        A fork made while its parent waits on tool calls (a sub-agent started by one of
        them) answers those calls with a placeholder first: providers reject a tool_use
        without a result, and the parent's history before them stays byte-identical.
        """
        if self.instruction is None:
            raise RuntimeError("run() sends a fork's instruction; use send() on a main session")
        instruction, self.instruction = self.instruction, None
        last = self._history[-1] if self._history else None
        pending = last.tool_calls if isinstance(last, AssistantMessage) else ()
        if not pending:
            return await self.send(instruction)
        placeholders = tuple(ToolResultBlock(tool_use_id=c.id, content=DELEGATED) for c in pending)
        return await self.send(UserMessage(content=(*placeholders, TextBlock(text=instruction))))

    # -- deliberate prefix changes -------------------------------------------------------------

    def declare(
        self, prefix: Prefix, reason: str, *, extra_tools: dict[str, Tool] | None = None
    ) -> None:
        """Switch to `prefix` as a declared break: the next record carries `reason`."""
        info = self.agent.provider.model_info(prefix.params.model)
        tokens = self.state.last_input_tokens
        extra = Usage(written_5m=tokens) if tokens else Usage()
        base = Usage(read=tokens) if tokens else Usage()
        estimate = None
        if tokens and (paid := cost_usd(extra, info)) is not None:
            estimate = paid - (cost_usd(base, info) or 0.0)
        self.prefix = prefix
        self._tools = {**self.implementations(prefix), **(extra_tools or {})}
        self.declared = reason
        self.queue(
            PrefixRebased(
                session_id=self.id,
                prefix=prefix,
                reason=reason,
                estimated_rewrite_tokens=tokens,
                estimated_cost_usd=estimate,
            )
        )

    async def rebase(
        self,
        *,
        reason: str,
        tools: list[Tool] | tuple[Tool, ...] | None = None,
        system: str | None = None,
        model: str | None = None,
    ) -> None:
        """The only way to change a session's prefix; the next call is a declared break."""
        prefix = lineage.rebased_prefix(self.prefix, tools=tools, system=system, model=model)
        self.declare(prefix, reason, extra_tools={t.name: t for t in tools or ()})
        changes: dict[str, Any] = {"rebased": reason}
        if model is not None:
            changes["model"] = model
        self.queue(ConfigChanged(session_id=self.id, changes=changes))
        await self.flush()

    # -- new lineages ---------------------------------------------------------------------------

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
        Run it with `await child.run()`.
        """
        return lineage.fork(
            self,
            instruction=instruction,
            policy=policy,
            kind=kind,
            max_iterations=max_iterations,
            rebase=rebase,
            sink=sink,
        )

    def branch(self, *, at: int | None = None, sink: EventSink | None = None) -> Session:
        """A new session sharing this one's prefix and first `at` messages."""
        return lineage.branch(self, at=at, sink=sink)

    @classmethod
    async def resume(
        cls,
        session_id: str,
        agent: Agent,
        *,
        store: SessionSource,
        tools: ToolsMode = "keep",
        interrupted: Literal["record", "rerun"] = "record",
    ) -> Session:
        """Continue a stored session; see `stoker.agent.resume` for the rules."""
        return await lineage.resume(
            cls, session_id, agent, store=store, tools=tools, interrupted=interrupted
        )
