"""A live conversation: the frozen prefix, the append-only history, and its cache records.

A `Session` owns what the agent has said; the agent only says what it is. A session is
built from a `SessionStart` (see `starts.py`: new, fork, branch, resume), and it is the
only thing that changes itself: the loop, the review and the delegate tool get small
values of functions from it, never the object. The prefix changes only through `rebase`,
which records the change as a declared break.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from statistics import median
from typing import Any, Literal

from stoker.agent import warmth
from stoker.agent.compaction import (
    choose_cut,
    compacted,
    due,
    instruction,
    request_tokens,
    summary_marks,
)
from stoker.agent.delegate import Delegator, FanOut, running
from stoker.agent.fallback import Detour, Route, restored, sendable, transient, why
from stoker.agent.integrations import ToolkitTracker
from stoker.agent.loop import TurnResult, TurnSteps, run_turn
from stoker.agent.resume import ToolsMode
from stoker.agent.review import BackgroundReviews, ReviewOutcome
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
    new_start,
    resume_start,
)
from stoker.agent.state import CacheState
from stoker.agent.telemetry import CallFacts, TurnFacts
from stoker.cache.fleet import shared_tokens
from stoker.cache.keys import cache_key
from stoker.cache.models import ModelInfo
from stoker.cache.planner import plan
from stoker.cache.pricing import cost_usd
from stoker.cache.record import build_record, notify
from stoker.cache.time_policy import (
    Idle,
    TimePolicy,
    WarmPlan,
    decide,
    decide_shared,
    lifetimes,
    retention,
)
from stoker.cache.tokens import estimate_tokens
from stoker.errors import (
    CompactionError,
    ConfigError,
    PrefixError,
    ProviderError,
    SessionNotFound,
    StokerError,
    ToolError,
)
from stoker.providers.base import CallContext, Completion
from stoker.tools import (
    ApprovalDecision,
    ApprovalRequest,
    Approvals,
    DispatchPolicy,
    Tool,
    ToolContext,
    run_tool_calls,
    unavailable_tool,
)
from stoker.wire.blocks import TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.events import (
    ApprovalDecided,
    CacheRecorded,
    ConfigChanged,
    Event,
    EventSink,
    HistoryCompacted,
    MemorySink,
    MessageAppended,
)
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import AssistantMessage, Message, UserMessage, tool_results, user_text
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request, Ttl
from stoker.wire.stored import SessionSource
from stoker.wire.usage import Usage

DELEGATED = "(handed to a sub-agent; its answer goes to the conversation that asked)"
CUT_OFF = "the previous message got no answer: its turn was cut off"
log = logging.getLogger(__name__)


class Session:
    """One conversation. Create with `agent.session()` or `await agent.open(store, id)`.

    Public surface (everything else is private):
      id, role, parent_id, agent, prefix, history, records
      send(text), fork(), branch(), rebase(reason=...), adopt(agent), drain()
      compact()   (a summary replaces the older history; turns also compact when due)
      warm_plan(), warm()   (keep-warm across idle gaps, see `stoker.agent.keepwarm`)
    """

    __slots__ = (
        "_agent",
        "_anchor",
        "_declared_break",
        "_detour",
        "_epoch",
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
        self._tools = {**self._advertised(start.prefix), **start.extra_tools}
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

    # -- what a session is ----------------------------------------------------------------

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

    # -- turns ------------------------------------------------------------------------------

    async def send(
        self,
        text: str | UserMessage,
        *,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult:
        """Run one user turn: model, tools, model... until an answer or the budget ends.

        `note` is volatile context (time, recalled memory) sent after the text in this
        message and stored exactly as sent; it never touches the prefix.

        A turn cut off (the process died, the provider failed) leaves its user message
        unanswered. `retry=True` says this send may repeat that message: when the history
        ends with this very text unanswered, the turn is finished instead of the text sent
        twice. Any other send after a cut-off turn tells the model, in a note, that the
        message before got no answer, and the result's `notice` tells the caller.
        """
        hooks = callbacks or Callbacks()
        async with self._lock:
            self._gap_plan = self._own_plan()  # what the time policy meant for this gap
            self._leave_detour()
            self._state.turn_starts(self._agent.clock.now())
            words = text if isinstance(text, str) else text.prompt
            unanswered = self._cut_off()
            message: UserMessage | None = None
            notice = ""
            if not (retry and unanswered is not None and unanswered == words):
                if unanswered is not None:
                    notice = CUT_OFF
                    note = "\n\n".join(n for n in (note, f"({CUT_OFF}.)") if n)
                message = await self._user_message(text, note, hooks)
            steps = TurnSteps(
                append=self._append,
                call_model=lambda: self._call_model(hooks),
                run_tools=lambda calls: self._run_tools(calls, hooks),
                status=lambda line: hooks.on_status(line) if hooks.on_status else None,
                max_iterations=self._max_iterations or self._agent.max_iterations,
            )
            with self._agent.telemetry.turn(self._turn_facts()) as span:
                result = await run_turn(steps, message)
                if notice:
                    result = replace(result, notice=notice)
                self._state.turn_ended()
                span.ended(result)
                review = self._agent.review
                if review is not None and self._role == "main":  # under this turn's span
                    self._reviews.after_turn(
                        self,
                        result,
                        review,
                        on_summary=hooks.on_review,
                        on_error=hooks.on_review_error,
                    )
            return result

    def _leave_detour(self) -> None:
        """Back to the primary at a new turn once the cool-down passed: it sends the prefix
        it sent before the fallback, so it reads its own cache if that is still warm."""
        detour = self._detour
        self._detour = restored(detour, self._agent.clock.now(), self._agent.fallback_cooldown)
        if detour is not None and self._detour is None and self._declared_break is None:
            self._declared_break = f"fallback over: back on {self._prefix.params.model}"

    def _cut_off(self) -> str | None:
        """The words of the last user message when the model never answered its turn."""
        if not self._history or not isinstance(self._history[-1], UserMessage):
            return None
        for message in reversed(self._history):
            if isinstance(message, UserMessage) and message.text:
                return message.prompt
        return ""

    async def drain(self) -> list[ReviewOutcome]:
        """Wait for the background reviews started since the last drain; oldest first."""
        return await self._reviews.drain()

    # -- idle gaps ----------------------------------------------------------------------------

    def warm_plan(self, *, gaps: Sequence[float] = ()) -> WarmPlan | None:
        """What the time policy will do before this session's cache entry expires, and
        when; None while nothing is cached, a turn is running (it may wait minutes for an
        approval: the turn's next call refreshes the entry, not a keep-warm) or unfinished,
        or a rebase waits for the next call (what is cached is the old prefix), and for
        forks, reviews and sub-agents (they end soon; only what they share with their
        parent lives on).
        `gaps` adds observed idle gaps (seconds) to the ones this session saw, e.g. the
        user's other sessions.

        When the session lets its own entry go and it made the last call of its agent's
        fleet (`stoker.cache.fleet`), the plan may keep only the shared tools and system
        prompt warm for the next new session (`scope="shared"`)."""
        if self._lock.locked():  # a turn (or a rebase) is running: not an idle gap
            return None
        return self._plan(gaps=gaps)

    def _plan(self, *, gaps: Sequence[float] = ()) -> WarmPlan | None:
        own = self._own_plan(gaps=gaps)
        if own is None or own.sends:
            return own
        shared = self._shared_plan()
        return shared if shared is not None and shared.sends else own

    def _shared_plan(self) -> WarmPlan | None:
        fleet = self._agent.fleet.get(self._prefix)
        if fleet is None or fleet.last_user != self._id or len(fleet.arrivals) < 2:
            return None  # another session speaks for the fleet, or none has arrived since
        info = self._info()
        menu = lifetimes(info)
        if menu is None:
            return None
        policy = self._agent.cache_policy.keep_warm
        if self._state.warm_failed_at is not None or not policy.fleet:
            return None
        idle = Idle(
            refreshed_at=fleet.last_use,
            live_for=fleet.live_for,
            idle_since=fleet.last_arrival,
            cached=shared_tokens(self._prefix),
            tail=0,
            long_lived=fleet.live_for >= menu.long,
            overhead=warmth.PLACEHOLDER_TOKENS,
            spent=fleet.spent,
            spent_usd=self._state.warm_spent_usd,
        )
        price = info.input / 1_000_000 if info.input is not None else None
        return decide_shared(idle, info, policy, arrivals=fleet.gaps(), price=price)

    def _own_plan(self, *, gaps: Sequence[float] = ()) -> WarmPlan | None:
        if self._role not in ("main", "branch") or self._unanswered:
            return None
        if self._declared_break is not None or self._detour is not None:
            return None  # the next call sends another prefix anyway
        info = self._info()
        gap = warmth.idle(self._state, self._history, self._prefix, info)
        if gap is None:
            return None
        policy = self._agent.cache_policy.keep_warm
        if self._state.warm_failed_at is not None:
            policy = replace(policy, enabled=False)  # once per gap: a failure is not retried
        price = info.input / 1_000_000 if info.input is not None else None
        gap = replace(gap, shared=self._kept_by_fleet(info, policy))
        return decide(gap, info, policy, gaps=[*self._state.gaps, *gaps], price=price)

    def _kept_by_fleet(self, info: ModelInfo, policy: TimePolicy) -> int:
        """Tokens of this session's prefix that its agent's new sessions keep warm anyway:
        the shared tools and system prompt, while new sessions typically arrive within
        the long TTL (their own calls, or the fleet's keep-warm, refresh that entry)."""
        menu = lifetimes(info)
        fleet = self._agent.fleet.get(self._prefix)
        if not policy.fleet or menu is None or fleet is None or len(fleet.arrivals) < 2:
            return 0
        return shared_tokens(self._prefix) if median(fleet.gaps()) <= menu.long else 0

    async def warm(self, *, gaps: Sequence[float] = ()) -> CacheRecord | None:
        """Send the planned keep-warm request if it is due now (see `warm_plan`); its
        record, or None when nothing was due. It never changes the history, and a failed
        one is logged and leaves the session as it was."""
        async with self._lock:
            plan = self._plan(gaps=gaps)
            now = self._agent.clock.now()
            state = self._state
            if plan is None or not plan.sends or now < plan.at or state.last_started is None:
                return None
            if now >= plan.at + self._agent.cache_policy.keep_warm.margin:
                return None  # too late to be sure the entry is still there: let it go
            info = self._info()
            key = self._cache_key(info, self._prefix)
            shared = plan.scope == "shared"
            history: Sequence[Message] = () if shared else self._history
            if self._mixed:  # as the primary's requests send it (see `fallback.sendable`)
                history = sendable(history, to=info.provider, home=info.provider)[0]
            request = warmth.request(plan, history, self._prefix, info, cache_key=key)
            provider = self._agent.provider
            with self._agent.telemetry.call(self._call_facts(plan.action, request)) as span:
                try:
                    completion = await provider.complete(request, CallContext(session_id=self._id))
                except Exception as exc:  # a keep-warm must never hurt the session
                    log.warning("keep-warm %s of session %s failed: %r", plan.action, self._id, exc)
                    span.failed(exc)
                    state.warm_failed_at = now
                    return None
                record = self._warm_record(plan, request, completion)
                span.recorded(record)
            self._records.append(record)
            notify(record)
            await self._emit(CacheRecorded(session_id=self._id, record=record))
            return record

    def _warm_record(self, plan: WarmPlan, request: Request, completion: Completion) -> CacheRecord:
        """The record of a keep-warm request, remembered as what the cache now holds."""
        info = self._info()
        state = self._state
        shared = plan.scope == "shared"
        provider = self._agent.provider
        record = build_record(
            session_id=self._id,
            seq=len(self._records),
            role=self._role,
            provider=provider.name,
            info=info,
            request=request if shared else replace(request, messages=tuple(self._history)),
            previous=None,
            previous_started_at=None,
            started_at=completion.started_at,
            usage=completion.usage,
            history=EMPTY_CHAIN if shared or not state.chain else state.chain[-1],
            new_from=0 if shared else len(self._history),
            retries=completion.retries,
        )
        record = warmth.explained(record, plan)
        spent = warmth.units(completion.usage, info)
        if shared:  # the session's own entry is untouched: only the fleet's moved on
            self._agent.fleet.spend(self._prefix, spent)
        else:
            state.after_refresh(request, record)
            state.warm_spent += spent
        self._fleet_used(request, record.started_at)
        state.warm_spent_usd += record.cost_usd or 0.0
        return record

    # -- new sessions from this one ----------------------------------------------------------

    def fork(
        self,
        *,
        policy: DispatchPolicy | Inherit = INHERIT,
        role: str = "fork",
        max_iterations: int | Inherit | None = INHERIT,
        rebase: Rebase | None = None,
        store: EventSink | None = None,
    ) -> Session:
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
        )
        if rebase is None:
            self._state.forked_at(self._prefix, start.anchor)
        return Session(start, agent=self._agent, store=store or self._store)

    def branch(self, *, at: int | None = None, store: EventSink | None = None) -> Session:
        """A new session sharing this one's prefix and first `at` messages."""
        start = branch_start(self._snapshot(), at=at)
        return Session(start, agent=self._agent, store=store or self._store)

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
        )

    # -- deliberate changes ----------------------------------------------------------------

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
            self._tools = {**self._advertised(prefix), **{t.name: t for t in tools or ()}}
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

    # -- compaction -----------------------------------------------------------------------

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
        history = self._history
        cut = choose_cut(history, int(window * policy.keep) if window else 0)
        if cut is None:
            raise CompactionError(
                f"session {self._id!r} has nothing to compact: its history has no earlier "
                "turn that can be summarised without splitting a tool call from its result"
            )
        start = fork_start(
            self._snapshot(),
            role="compaction",
            policy=DispatchPolicy(allowed=frozenset(), reason="a summary is written without tools"),
            max_iterations=2,  # a tool call it tries is refused, and it answers after that
            cost=self._cost,
            anchored=False,
        )
        writer = Session(start, agent=self._agent, store=self._store)
        try:
            result = await writer.send(
                instruction(history, cut), callbacks=Callbacks(on_record=hooks.on_record)
            )
        except StokerError as exc:
            raise CompactionError(
                f"session {self._id!r} was not compacted: the summary call failed ({exc}); "
                "the history is as it was"
            ) from exc
        summary = result.text.strip()
        if result.exit != "answered" or not summary:
            raise CompactionError(
                f"session {self._id!r} was not compacted: the summary came back empty; "
                "the history is as it was"
            )
        messages = compacted(summary, history, cut)
        tokens = request_tokens(self._prefix, messages)
        paid = self._cost(Usage(written_5m=tokens))
        await self._emit(
            HistoryCompacted(
                session_id=self._id,
                messages=messages,
                replaced=len(history),
                kept_from=cut,
                reason=reason,
                summarised_by=writer.id,
                estimated_rewrite_tokens=tokens,
                estimated_cost_usd=paid,
            )
        )
        old, chain = self._state, list[str]()
        for m in messages:
            chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, m))
        # What a resume of the stored session starts from: no write to plan against, no
        # entry to keep warm; the gaps and the spending stay the session's.
        self._state = CacheState(
            chain=chain,
            last_request=old.last_request,
            idle_since=old.idle_since,
            gaps=old.gaps,
            warm_spent_usd=old.warm_spent_usd,
        )
        self._history = list(messages)
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

    # -- one turn's steps (handed to the loop as `TurnSteps`) --------------------------------

    async def _emit(self, event: Event) -> None:
        self._pending.append(event)
        await self._flush()

    async def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for e in pending:
            await self._store.emit(e)

    async def _append(self, message: Message) -> None:
        """Append to history; acknowledged once the store has it."""
        self._history.append(message)
        chain = self._state.chain
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, message))
        index = len(self._history) - 1
        await self._emit(MessageAppended(session_id=self._id, index=index, message=message))

    async def _user_message(
        self, text: str | UserMessage, note: str | None, hooks: Callbacks
    ) -> UserMessage:
        """The message as sent: answers to calls left waiting, the text, the caller's
        note, then any toolkit change."""
        answers: tuple[ToolResultBlock, ...] = ()
        if self._unanswered:
            calls, self._unanswered = self._unanswered, ()
            if self._rerun:  # a resumed session asked to run interrupted calls again
                await self._append(tool_results(await self._run_tools(calls, hooks)))
            else:  # a fork made while its parent waits on these calls (a sub-agent)
                answers = tuple(ToolResultBlock(tool_use_id=c.id, content=DELEGATED) for c in calls)
        toolkit_note = ""
        if self._toolkits is not None:
            toolkit_note = await self._toolkits.turn_note(self._id)
            if toolkit_note:
                view = self._toolkits.announced.fingerprint
                self._pending.append(
                    ConfigChanged(session_id=self._id, changes={"toolkit_view": view})
                )
        if isinstance(text, UserMessage):
            extra = [TextBlock(text=n) for n in (note, toolkit_note) if n]
            content = (*answers, *text.content, *extra)
            return UserMessage(content=content) if content != text.content else text
        combined = "\n\n".join(n for n in (note, toolkit_note) if n) or None
        message = user_text(text, note=combined)
        return UserMessage(content=(*answers, *message.content)) if answers else message

    def _fleet_used(self, request: Request, started_at: float) -> None:
        """Tell the fleet this call refreshed the shared entry (its tools+system marker)."""
        menu = lifetimes(self._info())
        marker = next((b for b in request.breakpoints if b.message is None), None)
        if menu is None or marker is None:
            return
        live_for = menu.long if marker.ttl == "1h" else menu.short
        self._agent.fleet.used(self._prefix, started_at, session_id=self._id, live_for=live_for)

    def _cache_key(self, info: ModelInfo, prefix: Prefix) -> str | None:
        """OpenAI's key for the next request, counted toward the rate its shards follow."""
        if info.provider != "openai":
            return None
        self._agent.key_shards.observe(prefix, self._agent.clock.now())
        return cache_key(prefix, self._root_id)

    def _request(self, *, stream: bool, route: Route | None = None) -> Request:
        """The next request: to the primary, or on `route` of the fallback chain (the same
        tools, system and history, another model; thinking another provider signed is
        left out, see `stoker.agent.fallback`)."""
        prefix = self._prefix if route is None else self._prefix.with_params(model=route.model)
        provider = self._agent.provider if route is None else route.provider
        info = provider.model_info(prefix.params.model)
        if route is None and not self._mixed:  # the usual case: nothing to leave out
            messages, stripped = tuple(self._history), 0
        else:
            home = self._info().provider
            messages, stripped = sendable(self._history, to=info.provider, home=home)
        if stripped and self._declared_break is not None and "thinking" not in self._declared_break:
            self._declared_break += f"; {stripped} thinking blocks another provider signed left out"
        p = plan(
            info,
            messages,
            previous=self._state.last_write(prefix),
            policy=self._agent.cache_policy,
            anchor=self._anchor,
            thinking=prefix.params.thinking_budget is not None,
        )
        breakpoints = p.breakpoints
        if self._role == "compaction":
            warm = self._cold_for() is None and self._state.last_started is not None
            read_at = self._state.last_write(self._prefix) if warm else None
            breakpoints = summary_marks(breakpoints, read_at)
        return Request(
            prefix=prefix,
            messages=messages,
            max_tokens=self._agent.max_tokens,
            breakpoints=breakpoints,
            cache_key=self._cache_key(info, prefix),
            cache_retention=retention(info, self._agent.cache_policy.keep_warm),
            stream=stream,
            # renders of the primary's messages as sent; a route or a stripped copy renders anew
            render_memo=self._state.render_memo if route is None and not stripped else {},
        )

    async def _call_model(self, hooks: Callbacks) -> tuple[Completion, CacheRecord]:
        """One provider call on the current history, recorded and explained."""
        await self._compact_if_due(hooks)
        route = self._agent.routes[self._detour.index] if self._detour is not None else None
        request = self._request(stream=hooks.on_text is not None, route=route)
        with self._agent.telemetry.call(self._call_facts("turn", request)) as span:
            completion, request, route = await self._complete(request, route, hooks)
            record = self._measured(request, completion, route)
            span.recorded(record)
        self._records.append(record)
        notify(record)
        if hooks.on_record is not None:
            hooks.on_record(record)
        await self._emit(CacheRecorded(session_id=self._id, record=record))
        return completion, record

    async def _complete(
        self, request: Request, route: Route | None, hooks: Callbacks
    ) -> tuple[Completion, Request, Route | None]:
        """The answer to `request`, from the next entry of the fallback chain while the one
        asked is unavailable; with the request that was answered and who answered it."""
        context = CallContext(session_id=self._id, on_text=hooks.on_text)
        routes = self._agent.routes
        while True:
            provider = self._agent.provider if route is None else route.provider
            try:
                completion = await provider.complete(request, context)
            except ProviderError as exc:
                index = self._detour.index + 1 if self._detour is not None else 0
                if not transient(exc) or index >= len(routes):
                    raise
                route = routes[index]
                reason = why(request.prefix.params.model, exc)
                self._detour = Detour(index=index, since=self._agent.clock.now(), reason=reason)
                self._declared_break = f"{reason}; continuing on {route.spec}"
                log.warning("session %s: %s", self._id, self._declared_break)
                request = self._request(stream=request.stream, route=route)
                continue
            family = provider.model_info(request.prefix.params.model).provider
            if family != self._info().provider:  # its thinking goes back only to its family
                message = replace(completion.message, origin=family)
                completion = replace(completion, message=message)
                self._mixed = True
            return completion, request, route

    def _measured(
        self, request: Request, completion: Completion, route: Route | None = None
    ) -> CacheRecord:
        """The record of a finished call, remembered for planning and explaining the next."""
        provider = self._agent.provider if route is None else route.provider
        state = self._state
        info = provider.model_info(request.prefix.params.model)
        if route is None:  # a fallback's calls are no part of the agent's fleet
            if state.last_started is None and self._role == "main" and self._parent_id is None:
                self._agent.fleet.arrived(self._prefix, completion.started_at)
            self._fleet_used(request, completion.started_at)
        record = build_record(
            session_id=self._id,
            seq=len(self._records),
            role=self._role,
            provider=provider.name,
            info=info,
            request=request,
            previous=state.last_request,
            previous_started_at=state.last_started,
            previous_written=state.last_written,
            previous_cached=state.last_cached,
            started_at=completion.started_at,
            usage=completion.usage,
            history=state.chain[-1] if state.chain else EMPTY_CHAIN,
            new_from=state.recorded_upto,
            retries=completion.retries,
            facts=completion.facts,
            declared_break=self._declared_break,
            ttl_seconds=self._live_for(state.live_ttl),
        )
        record = warmth.after_stripping(record, request.messages, request.prefix, info)
        record = warmth.after_gap(record, self._gap_plan)
        if route is not None:
            record = replace(record, fallback_of=self._prefix.params.model)
        self._gap_plan = None
        self._declared_break = None
        self._anchor = None
        state.after_call(request, record)
        return record

    def _turn_facts(self) -> TurnFacts:
        return TurnFacts(
            agent=self._agent.name,
            session_id=self._id,
            parent_id=self._parent_id,
            role=self._role,
            provider=self._agent.provider.name,
            model=self._prefix.params.model,
        )

    def _call_facts(self, purpose: str, request: Request) -> CallFacts:
        return CallFacts(
            session_id=self._id,
            role=self._role,
            provider=self._agent.provider.name,
            model=self._prefix.params.model,
            purpose=purpose,
            max_tokens=request.max_tokens,
        )

    async def _run_tools(
        self, calls: Sequence[ToolUseBlock], hooks: Callbacks
    ) -> list[ToolResultBlock]:
        approvals = Approvals(
            approver=hooks.approver, record=self._decided, now=self._agent.clock.now
        )
        with running(self._delegator(hooks)):
            return await run_tool_calls(
                calls,
                self._tools,
                context_factory=lambda call: self._tool_context(call.id),
                policy=self._policy,
                on_progress=hooks.on_tool,
                approvals=approvals,
            )

    async def _decided(self, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        """Store who allowed or refused a risky call (an event; the history is unchanged)."""
        await self._emit(
            ApprovalDecided(
                session_id=self._id,
                tool=request.tool,
                tool_use_id=request.tool_use_id,
                summary=request.summary,
                approved=decision.approved,
                by=decision.by,
                reason=decision.reason,
                at=decision.at,
            )
        )

    def _tool_context(self, tool_use_id: str) -> ToolContext:
        return ToolContext(
            session_id=self._id,
            tool_use_id=tool_use_id,
            metadata={
                "origin": "background_review" if self._role == "review" else "foreground",
                "execution_context": self._role,
                "parent_session_id": self._parent_id,
                "platform": self._agent.platform,
                "role": self._role,
            },
        )

    def _delegator(self, hooks: Callbacks) -> Delegator:
        async def subagent(
            task: str, max_iterations: int, first_response: Callable[[], object] | None
        ) -> TurnResult:
            child = self.fork(role="subagent", max_iterations=max_iterations)
            on_record = (lambda _record: first_response()) if first_response else None
            # The child works for the same person: it asks them what this turn would.
            callbacks = Callbacks(on_record=on_record, approver=hooks.approver)
            return await child.send(task, callbacks=callbacks)

        return Delegator(
            history_length=lambda: len(self._history),
            fanout=self._fanout,
            subagent=subagent,
            toolkit_brief=self._toolkits.brief if self._toolkits else None,
        )

    # -- helpers ------------------------------------------------------------------------------

    def _advertised(
        self, prefix: Prefix, known: Mapping[str, Tool] | None = None
    ) -> dict[str, Tool]:
        """What a call to each tool `prefix` advertises runs (an unadvertised tool is
        unknown): the agent's tool, else the one in `known`, else, when its toolset is not
        registered now, a stand-in answering that it is unavailable. An outage keeps the
        prefix as it is: dropping the tools would cost a rewrite when they go and another
        when they come back."""
        runtime = {t.name: t for t in self._agent.available_tools()}
        found: dict[str, Tool] = {}
        for name, spec in zip(prefix.tool_names, prefix.tools, strict=True):
            chosen = runtime.get(name) or (known or {}).get(name)
            if chosen is None:
                try:
                    chosen = unavailable_tool(spec)
                except ToolError:  # a spec no stand-in can send: the tool stays unknown
                    continue
            found[name] = chosen
        return found

    def _cost(self, usage: Usage) -> float | None:
        return cost_usd(usage, self._info())

    def _info(self) -> ModelInfo:
        return self._agent.provider.model_info(self._prefix.params.model)

    def _live_for(self, ttl: Ttl | None) -> float:
        """Seconds an entry of `ttl` lives on this session's provider."""
        menu = lifetimes(self._info())
        if menu is None or ttl is None:
            return 300.0
        return menu.long if ttl == "1h" else menu.short


async def open_session(
    agent: SessionAgent,
    store: SessionSource,
    session_id: str | None = None,
    *,
    create: bool = True,
    tools: ToolsMode = "keep",
    interrupted: Literal["record", "rerun"] = "record",
    new_prefix: Callable[[], Prefix] | None = None,
) -> Session:
    """The stored session `session_id` continued by `agent`, or (when `create`) a new
    one stored at once under that id (a fresh id when None). See `starts.resume_start`
    for what a resume sends and refuses. `new_prefix` builds the prefix of a new
    session; a resume never calls it (a toolset that is down must not stop a session
    that already has its tools).
    """
    start: SessionStart | None = None
    if session_id is not None:
        try:
            stored = await store.load(session_id)
        except SessionNotFound:
            if not create:
                raise
        else:
            start = resume_start(
                stored,
                config=agent.config_snapshot(),
                tools=agent.available_tools(),
                mode=tools,
                rerun=interrupted == "rerun",
                cost=lambda usage: cost_usd(
                    usage, agent.provider.model_info(stored.prefix.params.model)
                ),
            )
    if start is None:
        if new_prefix is None:
            raise ConfigError("a new session needs its prefix (agent.open passes it)")
        start = new_start(
            prefix=new_prefix(),
            config=agent.config_snapshot(),
            now=agent.clock.now(),
            session_id=session_id,
        )
    session = Session(start, agent=agent, store=store)
    await session._flush()  # noqa: SLF001 - stored now: creation, a resume's rebase or answers
    return session
