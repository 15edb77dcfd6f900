"""A session's state and what changes it apart from a turn: its prefix, history, records
and events; forks, branches, rebases, a new agent; compaction.

`SessionBase` holds what only a session may change; `Session` (session.py) adds the turn.
One object owns its state, defined in two files so that each reads in one sitting; the
session's collaborators (calls.py, warmth.py, compaction.py, tool_runs.py) take values
and return values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Self

from stoker.agent import calls, tool_runs
from stoker.agent.compaction import Compacted, Summary, compact, due, request_tokens
from stoker.agent.delegate import FanOut
from stoker.agent.fallback import Detour
from stoker.agent.integrations import ToolkitTracker
from stoker.agent.loop import TurnResult
from stoker.agent.review import BackgroundReviews
from stoker.agent.seams import Callbacks, SessionAgent
from stoker.agent.starts import (
    INHERIT,
    Inherit,
    Rebase,
    SessionStart,
    Snapshot,
    branch_start,
    declared,
    fork_start,
)
from stoker.agent.telemetry import CallFacts
from stoker.cache.models import ModelInfo
from stoker.cache.planner import anchor_ttl
from stoker.cache.pricing import cost_usd
from stoker.cache.time_policy import WarmPlan
from stoker.cache.tokens import estimate_tokens
from stoker.errors import CompactionError, PrefixError
from stoker.tools import (
    DispatchPolicy,
    Tool,
)
from stoker.wire.events import (
    BatchSink,
    ConfigChanged,
    Event,
    EventSink,
    MemorySink,
    MessageAppended,
)
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import AssistantMessage, Message
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from stoker.wire.usage import Usage

log = logging.getLogger(__name__)


class SessionBase:
    """A session's state and its changes between turns; `Session` is what programs use.

    The public surface is listed once, on `Session` (session.py), this class's included;
    everything else is private.
    """

    __slots__ = (
        "__weakref__",
        "_agent",
        "_anchor",
        "_declared_break",
        "_detour",
        "_epoch",
        "_extra",
        "_fanout",
        "_gap_plan",
        "_history",
        "_id",
        "_lock",
        "_max_iterations",
        "_mixed",
        "_parent_id",
        "_pending",
        "_policy",
        "_prefix",
        "_records",
        "_rerun",
        "_reviews",
        "_role",
        "_root_id",
        "_state",
        "_store",
        "_toolkits",
        "_tools",
        "_unanswered",
    )

    def __init__(
        self, start: SessionStart, *, agent: SessionAgent, store: EventSink | None = None
    ) -> None:
        self._agent = agent
        self._id = start.session_id
        self._role = start.role
        self._parent_id = start.parent_id
        self._root_id = start.root_id
        self._prefix = start.prefix
        self._history = list(start.history)
        self._records: list[CacheRecord] = []
        self._store: EventSink = store if store is not None else MemorySink()
        self._state = start.state
        self._policy = start.policy
        self._max_iterations = start.max_iterations
        # Tools given to this session beyond its agent's (a rebase's, a resume's): a fork
        # gets them too, so it runs every tool it advertises.
        self._extra = dict(start.extra_tools)
        self._tools = self._runnable(start.prefix)
        self._lock = asyncio.Lock()
        self._pending: list[Event] = list(start.events)
        self._declared_break = start.declared_break
        self._anchor = start.anchor
        self._unanswered = start.unanswered
        self._rerun = start.rerun
        self._epoch = start.epoch
        self._detour: Detour | None = None
        # whether another provider family wrote part of the history (a fallback did)
        self._mixed = any(isinstance(m, AssistantMessage) and m.origin for m in self._history)
        self._fanout = FanOut()
        self._gap_plan: WarmPlan | None = None
        self._reviews = BackgroundReviews()
        integrations = agent.integrations
        self._toolkits = (
            ToolkitTracker(integrations, announced=start.announced) if integrations else None
        )

    @property
    def id(self) -> str:
        return self._id

    @property
    def role(self) -> str:
        """What the session is: "main", or how it was made ("fork", "review", "subagent",
        "branch")."""
        return self._role

    @property
    def parent_id(self) -> str | None:
        return self._parent_id

    @property
    def agent(self) -> SessionAgent:
        return self._agent

    @property
    def prefix(self) -> Prefix:
        return self._prefix

    @property
    def history(self) -> tuple[Message, ...]:
        return tuple(self._history)

    @property
    def records(self) -> tuple[CacheRecord, ...]:
        """One per provider call this object made (keep-warm included), oldest first."""
        return tuple(self._records)

    def fork(
        self,
        *,
        policy: DispatchPolicy | Inherit = INHERIT,
        role: str = "fork",
        max_iterations: int | Inherit | None = INHERIT,
        rebase: Rebase | None = None,
        store: EventSink | None = None,
    ) -> Self:
        """A child that sends exactly this session's prefix and history; `await
        child.send(text)` continues it without touching this session.

        `policy` narrows what the child may call (never what it sends). The child cannot
        send other tools or another system prompt unless `rebase` declares the break.
        `max_iterations=None` gives the child the agent's budget.
        """
        start = fork_start(
            self._snapshot(),
            role=role,
            policy=policy,
            max_iterations=(
                self._max_iterations if isinstance(max_iterations, Inherit) else max_iterations
            ),
            rebase=rebase,
            cost=self._cost,
            anchored_ttl=anchor_ttl(self._agent.cache_policy),
        )
        if rebase is None:
            long = anchor_ttl(self._agent.cache_policy) == "1h"
            self._state.forked_at(self._prefix, start.anchor, self._agent.clock.now(), long=long)
        return type(self)(start, agent=self._agent, store=store or self._store)

    def branch(self, *, at: int | None = None, store: EventSink | None = None) -> Self:
        """A new session sharing this one's prefix and first `at` messages."""
        start = branch_start(self._snapshot(), at=at)
        return type(self)(start, agent=self._agent, store=store or self._store)

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            session_id=self._id,
            root_id=self._root_id,
            prefix=self._prefix,
            history=tuple(self._history),
            policy=self._policy,
            state=self._state.copy(),
            config=self._agent.config_snapshot(),
            announced=self._toolkits.announced if self._toolkits else None,
            now=self._agent.clock.now(),
            declared_break=self._declared_break,
            epoch=self._epoch,
            extra_tools={n: t for n, t in self._extra.items() if n in self._prefix.tool_names},
        )

    async def rebase(
        self,
        *,
        reason: str,
        tools: Sequence[Tool] | None = None,
        system: str | None = None,
        model: str | None = None,
        effort: str | Inherit | None = INHERIT,
        thinking_budget: int | Inherit | None = INHERIT,
    ) -> None:
        """The only way to change a session's prefix; the next call is a declared break.

        `tools`, `system` and `model` replace what is sent when given; `effort` and
        `thinking_budget` too, where `None` clears them.
        """
        change = Rebase(
            reason=reason,
            tools=tuple(tools) if tools is not None else None,
            system=system,
            model=model,
            effort=effort,
            thinking_budget=thinking_budget,
        )
        async with self._lock:
            prefix, event = declared(
                self._prefix, change, session_id=self._id, state=self._state, cost=self._cost
            )
            self._prefix = prefix
            self._extra = {**self._extra, **{t.name: t for t in tools or ()}}
            self._tools = self._runnable(prefix)
            self._declared_break = reason
            self._pending.append(event)
            changes: dict[str, Any] = {"rebased": reason, **change.params()}
            await self._emit(ConfigChanged(session_id=self._id, changes=changes))

    async def adopt(self, agent: SessionAgent, *, config: Mapping[str, Any] | None = None) -> None:
        """Continue with `agent` from the next call: a new route (provider, base URL, key),
        new callbacks or limits, never a new prefix. Its cache-keying settings must equal
        the prefix's (rebase first to change them). `config` adds entries to the stored
        configuration, which then describes `agent`, so a later resume compares with it.
        """
        wanted = agent.config_snapshot()
        moved = [
            f"{name}: session sends {value!r}, the agent has {wanted.get(name)!r}"
            for name, value in self._prefix.params.to_dict().items()
            if name in wanted and wanted[name] != value
        ]
        if moved:
            raise PrefixError(
                f"session {self._id!r} cannot adopt an agent that would send another prefix: "
                + "; ".join(moved)
                + ". Call session.rebase(reason=...) with the change first."
            )
        async with self._lock:
            self._agent = agent
            self._tools = self._advertised(self._prefix, known=self._tools)
            changes = {**wanted, **(config or {})}
            await self._emit(ConfigChanged(session_id=self._id, changes=changes))

    async def _answer(self, text: str, callbacks: Callbacks) -> TurnResult[Any]:
        """A plain turn (`Session.send`); what a compaction's summary fork runs."""
        raise NotImplementedError

    async def compact(
        self, *, reason: str = "requested", callbacks: Callbacks | None = None
    ) -> None:
        """Replace the older part of the history by a summary, keeping the newest turns
        verbatim (see `stoker.agent.compaction`). A fork with this session's prefix and no
        tools writes the summary, reading the cache; the next call is a declared break.
        The replaced messages stay in the store. Raises `CompactionError` when there is
        nothing to cut or the summary fails; the session is then as it was."""
        async with self._lock:
            await self._compact(reason, callbacks or Callbacks())

    async def _compact(self, reason: str, hooks: Callbacks) -> None:
        policy = self._agent.compaction
        window = policy.window or self._info().context_window or 0

        async def summarise(instruction: str) -> Summary:
            start = fork_start(
                self._snapshot(),
                role="compaction",
                policy=DispatchPolicy(
                    allowed=frozenset(), reason="a summary is written without tools"
                ),
                max_iterations=2,  # a tool call it tries is refused, and it answers after that
                cost=self._cost,
                anchored=False,
            )
            writer = type(self)(start, agent=self._agent, store=self._store)
            result = await writer._answer(  # noqa: SLF001 (a session of this same class)
                instruction, Callbacks(on_record=hooks.on_record)
            )
            return Summary(text=result.text, answered=result.exit == "answered", writer=writer.id)

        done: Compacted = await compact(
            session_id=self._id,
            prefix=self._prefix,
            history=self._history,
            state=self._state,
            keep_tokens=int(window * policy.keep) if window else 0,
            reason=reason,
            summarise=summarise,
            cost=self._cost,
        )
        await self._emit(done.event)
        self._state = done.state
        self._history = list(done.messages)
        self._declared_break = f"compaction: {reason}"
        self._anchor = None
        self._epoch += 1

    async def _compact_if_due(self, hooks: Callbacks) -> None:
        """Before a call: compact when the request nears the context window, or when the
        cache went cold and the history is past the lower, idle threshold."""
        policy = self._agent.compaction
        info = self._info()
        window = policy.window or info.context_window
        if self._role in ("compaction", "review") or not policy.enabled or not window:
            return
        size = self._next_size()
        reason = due(size, window, policy, cold_for=self._cold_for())
        if reason is None:
            return
        try:
            await self._compact(reason, hooks)
        except CompactionError as exc:
            room = size + self._agent.max_tokens
            if room > window:
                raise CompactionError(
                    f"{exc}; the next request (about {size:,} tokens, plus "
                    f"{self._agent.max_tokens:,} of output) does not fit the {window:,}-token "
                    "context window. Start a new session, or branch this one at an earlier "
                    "message"
                ) from exc
            log.warning("session %s: %s; the turn goes on uncompacted", self._id, exc)

    def _next_size(self) -> int:
        """The next request's input: the last call's, exactly as the provider counted it,
        plus an estimate of what was appended since."""
        state = self._state
        if state.last_input_tokens and state.recorded_upto <= len(self._history):
            since = self._history[state.recorded_upto :]
            return state.last_input_tokens + estimate_tokens(b for m in since for b in m.content)
        return request_tokens(self._prefix, self._history)

    def _cold_for(self) -> float | None:
        """Seconds since the newest cache entry expired (None while one lives)."""
        state = self._state
        if state.last_started is None or state.live_ttl is None:
            return None
        over = self._agent.clock.now() - state.last_started - self._live_for(state.live_ttl)
        return over if over > 0 else None

    async def _emit(self, event: Event) -> None:
        self._pending.append(event)
        await self._flush()

    async def _flush(self) -> None:
        """Write what is pending, in one transaction when the sink takes several (a
        `ConfigChanged` merges into the stored config, so those go one at a time)."""
        pending, self._pending = self._pending, []
        store = self._store
        if (
            len(pending) > 1
            and isinstance(store, BatchSink)
            and not any(isinstance(e, ConfigChanged) for e in pending)
        ):
            await store.emit_many(pending)
            return
        for e in pending:
            await store.emit(e)

    async def _append(self, message: Message) -> None:
        """Append to history; acknowledged once the store has it."""
        self._history.append(message)
        chain = self._state.chain
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, message))
        index = len(self._history) - 1
        await self._emit(MessageAppended(session_id=self._id, index=index, message=message))

    def _runnable(self, prefix: Prefix) -> dict[str, Tool]:
        """What a call to each tool `prefix` advertises runs: the session's own given
        tools first, else the agent's (or a stand-in)."""
        mine = {n: t for n, t in self._extra.items() if n in prefix.tool_names}
        return {**self._advertised(prefix), **mine}

    def _advertised(
        self, prefix: Prefix, known: Mapping[str, Tool] | None = None
    ) -> dict[str, Tool]:
        return tool_runs.advertised(prefix, self._agent, known)

    def _call_facts(self, purpose: str, request: Request) -> CallFacts:
        return CallFacts(
            session_id=self._id,
            role=self._role,
            provider=self._agent.provider.name,
            model=self._prefix.params.model,
            purpose=purpose,
            max_tokens=request.max_tokens,
        )

    def _cost(self, usage: Usage) -> float | None:
        return cost_usd(usage, self._info())

    def _info(self) -> ModelInfo:
        return self._agent.provider.model_info(self._prefix.params.model)

    def _live_for(self, ttl: Any) -> float:
        """Seconds an entry of `ttl` lives on this session's provider."""
        return calls.live_for(self._info(), ttl)
