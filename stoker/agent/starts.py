"""How a session begins: new, forked, branched or resumed, as one frozen value.

Each function here is pure: it takes values (a parent's snapshot, a stored session) and
returns a `SessionStart` holding the prefix, the history, the cache state, the events to
record and any declared break not sent yet. `Session(start, ...)` builds itself from it,
so nothing outside `Session` ever assembles or mutates one. Forks, branches and resumes
start from exactly the prefix and history their source sends, so their first request
reads the source's cache; none of them can send other tools or another system prompt
unless a `Rebase` declares the break.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from stoker.agent.resume import ToolsMode, reconcile
from stoker.agent.state import CacheState
from stoker.cache.planner import BlockRef, last_cacheable
from stoker.integrations import ToolkitView
from stoker.tools import DispatchPolicy, Tool
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock
from stoker.wire.events import (
    ConfigChanged,
    Event,
    MessageAppended,
    PrefixRebased,
    SessionCreated,
)
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step, key_of
from stoker.wire.messages import AssistantMessage, Message, tool_results
from stoker.wire.prefix import Prefix
from stoker.wire.request import Request, Ttl
from stoker.wire.stored import StoredSession
from stoker.wire.usage import Usage


class Inherit(enum.Enum):
    """The type of `INHERIT`: "keep the source's value", which is not `None` ("clear")."""

    INHERIT = "INHERIT"

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Final = Inherit.INHERIT

CostFn = Callable[[Usage], float | None]
"""The price of a usage on the session's model (None when the price is unknown)."""

INTERRUPTED = (
    "interrupted: the process stopped before this tool call returned; it was not run again. "
    "Call it again if its result is still needed."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebase:
    """A deliberate prefix change, recorded as a declared break with `reason`.

    `INHERIT` keeps a part as it is; for `effort` and `thinking_budget`, `None` clears it.
    """

    reason: str
    tools: tuple[Tool, ...] | None = None
    system: str | None = None
    model: str | None = None
    effort: str | Inherit | None = INHERIT
    thinking_budget: int | Inherit | None = INHERIT

    def apply(self, prefix: Prefix) -> Prefix:
        """`prefix` with this rebase's parts replaced (tools sorted by wire name)."""
        if self.tools is not None:
            ordered = sorted(self.tools, key=lambda t: t.name)
            prefix = replace(prefix, tools=tuple(t.spec_bytes for t in ordered))
        if self.system is not None:
            prefix = replace(prefix, system=self.system)
        params = self.params()
        return prefix.with_params(**params) if params else prefix

    def params(self) -> dict[str, Any]:
        """The cache-keying parameters this rebase sets."""
        params: dict[str, Any] = {}
        if self.model is not None:
            params["model"] = self.model
        if not isinstance(self.effort, Inherit):
            params["effort"] = self.effort
        if not isinstance(self.thinking_budget, Inherit):
            params["thinking_budget"] = self.thinking_budget
        return params


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStart:
    """Everything a `Session` begins with. `state` is handed over: one start, one session."""

    session_id: str
    role: str  # "main", "fork", "review", "subagent", "branch"
    prefix: Prefix
    history: tuple[Message, ...]
    root_id: str
    parent_id: str | None = None
    policy: DispatchPolicy = field(default_factory=DispatchPolicy)
    max_iterations: int | None = None  # None: the agent's
    state: CacheState = field(default_factory=CacheState)
    events: tuple[Event, ...] = ()  # recorded before the session's first own event
    declared_break: str | None = None  # declared, not yet carried by a call
    extra_tools: Mapping[str, Tool] = field(default_factory=dict)  # a rebase's own tools
    announced: ToolkitView | None = None  # what the source told the model of its toolkits
    anchor: BlockRef | None = None  # a block the first call marks (where a fork branched)
    unanswered: tuple[ToolUseBlock, ...] = ()  # calls the next user message must answer
    rerun: bool = False  # answer `unanswered` by running them again, not with a placeholder
    epoch: int = 0  # compactions the session made (its history is the newest one's)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """A live session as its forks and branches see it: plain values, copied."""

    session_id: str
    root_id: str
    prefix: Prefix
    history: tuple[Message, ...]
    policy: DispatchPolicy
    state: CacheState  # a copy the snapshot owns
    config: dict[str, Any]  # the agent's config snapshot
    announced: ToolkitView | None
    now: float
    declared_break: str | None = None  # declared on the parent, not yet carried by a call
    epoch: int = 0  # the parent's compactions: a resumed fork finds its history by it
    extra_tools: Mapping[str, Tool] = field(default_factory=dict)  # given beyond the agent's


def declared(
    prefix: Prefix, rebase: Rebase, *, session_id: str, state: CacheState, cost: CostFn
) -> tuple[Prefix, PrefixRebased]:
    """The prefix after `rebase`, and the event recording it with its estimated cost: the
    last call's input rewritten at 5-minute write prices instead of read."""
    new = rebase.apply(prefix)
    tokens = state.last_input_tokens
    estimate = None
    if tokens:
        paid, base = cost(Usage(written_5m=tokens)), cost(Usage(read=tokens))
        if paid is not None:
            estimate = paid - (base or 0.0)
    event = PrefixRebased(
        session_id=session_id,
        prefix=new,
        reason=rebase.reason,
        estimated_rewrite_tokens=tokens,
        estimated_cost_usd=estimate,
    )
    return new, event


def new_session_id() -> str:
    """A fresh lineage's id: random, as a session's identity should be (never its cache key)."""
    return uuid.uuid4().hex


def new_start(
    *,
    prefix: Prefix,
    config: Mapping[str, Any],
    now: float,
    session_id: str | None = None,
    history: Sequence[Message] = (),
) -> SessionStart:
    """A new main session with a prefix frozen now; `history` imports an earlier
    conversation (recorded as if appended, sent as given)."""
    sid = session_id or new_session_id()
    created = SessionCreated(
        session_id=sid, prefix=prefix, config={**config, "root_id": sid}, created_at=now
    )
    chain: list[str] = []
    for m in history:
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, m))
    appended = [MessageAppended(session_id=sid, index=i, message=m) for i, m in enumerate(history)]
    return SessionStart(
        session_id=sid,
        role="main",
        prefix=prefix,
        history=tuple(history),
        root_id=sid,
        state=CacheState(chain=chain),
        events=(created, *appended),
    )


def policy_config(policy: DispatchPolicy) -> dict[str, Any]:
    """A policy as stored with a fork, so a resumed review keeps its narrow policy."""
    allowed = sorted(policy.allowed) if policy.allowed is not None else None
    return {"allowed": allowed, "deny_risky": policy.deny_risky, "reason": policy.reason}


def policy_from_config(data: Mapping[str, Any] | None) -> DispatchPolicy:
    if not data:
        return DispatchPolicy()
    allowed = data.get("allowed")
    return DispatchPolicy(
        allowed=frozenset(allowed) if allowed is not None else None,
        deny_risky=bool(data.get("deny_risky", False)),
        reason=str(data.get("reason", "")),
    )


def fork_start(
    parent: Snapshot,
    *,
    role: str,
    policy: DispatchPolicy | Inherit,
    max_iterations: int | None,
    rebase: Rebase | None = None,
    cost: CostFn,
    anchored: bool = True,
    anchored_ttl: Ttl = "1h",
) -> SessionStart:
    """A child sending exactly `parent`'s prefix and history; its first user message
    answers any tool calls the parent is waiting on (a sub-agent started by one of them).

    With `rebase` the child sends another prefix from its first call, as a declared break.
    `anchored=False` writes nothing at the end of the parent's history for the parent to
    read (a compaction's summary: the parent never sends that history again);
    `anchored_ttl` is the TTL that entry is written at (`stoker.cache.planner.anchor_ttl`).
    """
    narrowed = parent.policy if isinstance(policy, Inherit) else parent.policy.narrow_to(policy)
    sid = f"{parent.session_id}.{role}-{uuid.uuid4().hex[:8]}"
    config = {
        **parent.config,
        "root_id": parent.root_id,
        "forked_at": len(parent.history),
        "policy": policy_config(narrowed),
        "max_iterations": max_iterations,
        "epoch": parent.epoch,
    }
    anchor = last_cacheable(parent.history) if anchored else None
    if anchor is not None and rebase is None:  # the parent can read what the fork writes here
        config["anchor"] = {"prefix_key": key_of(parent.prefix), "at": list(anchor)}
        if anchored_ttl != "1h":  # the parent holds no 1-hour entry there (absent: 1 hour)
            config["anchor"]["ttl"] = anchored_ttl
    created = SessionCreated(
        session_id=sid,
        prefix=parent.prefix,
        parent_id=parent.session_id,
        role=role,
        config=config,
        created_at=parent.now,
    )
    events: list[Event] = [created]
    prefix = parent.prefix
    if rebase is not None:
        prefix, rebased = declared(prefix, rebase, session_id=sid, state=parent.state, cost=cost)
        events.append(rebased)
    last = parent.history[-1] if parent.history else None
    return SessionStart(
        session_id=sid,
        role=role,
        prefix=prefix,
        history=parent.history,
        root_id=parent.root_id,
        parent_id=parent.session_id,
        policy=narrowed,
        max_iterations=max_iterations,
        state=parent.state,
        events=tuple(events),
        declared_break=rebase.reason if rebase is not None else parent.declared_break,
        extra_tools={
            **parent.extra_tools,
            **({t.name: t for t in rebase.tools or ()} if rebase is not None else {}),
        },
        announced=parent.announced,
        anchor=anchor,
        unanswered=last.tool_calls if isinstance(last, AssistantMessage) else (),
    )


def branch_start(source: Snapshot, *, at: int | None) -> SessionStart:
    """A new session with `source`'s prefix and its first `at` messages (all when None).

    The branch is stored self-contained (its messages are copied as events), keeps the
    lineage's cache key, and its first request reads what `source` wrote for that history.
    """
    count = len(source.history) if at is None else at
    history = source.history[:count]
    state = source.state
    state.chain = state.chain[:count]
    state.render_memo = {}
    state.written = {fp: at for fp, at in state.written.items() if at[0] < count}
    # Explain the branch's first call against its branch point, not the source's latest
    # request: a branch diverges from the source's future by design, not by accident.
    state.last_request = Request(prefix=source.prefix, messages=history)
    state.recorded_upto = count
    sid = new_session_id()
    created = SessionCreated(
        session_id=sid,
        prefix=source.prefix,
        parent_id=source.session_id,
        role="branch",
        config={**source.config, "root_id": source.root_id, "branched_at": count},
        created_at=source.now,
    )
    copied = [MessageAppended(session_id=sid, index=i, message=m) for i, m in enumerate(history)]
    return SessionStart(
        session_id=sid,
        role="branch",
        prefix=source.prefix,
        history=history,
        root_id=source.root_id,
        parent_id=source.session_id,
        policy=source.policy,
        state=state,
        events=(created, *copied),
        extra_tools=source.extra_tools,
    )


def restored_state(stored: StoredSession) -> CacheState:
    """The cache state of a stored session: its hash chain, its last call, and what its
    last process planned by: the 1-hour entries it holds, where and when each prefix last
    wrote, the idle gaps it watched, when its last turn ended (keep-warm calls since do
    not end a turn)."""
    chain: list[str] = []
    for m in stored.messages:
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, m))
    state = CacheState(
        chain=chain,
        written=dict(stored.writes),
        written_at=dict(stored.written_at),
        held=dict(stored.holds),
        gaps=list(stored.gaps),
    )
    last_record, messages = stored.last_record, stored.messages
    if last_record is not None:
        count = last_record.fingerprints.message_count
        state.last_request = Request(
            prefix=stored.prefix, messages=messages[:count], breakpoints=last_record.breakpoints
        )
        state.last_started = last_record.started_at
        state.last_written = last_record.usage.written
        state.last_input_tokens = last_record.usage.input_total
        state.last_cached = last_record.usage.read + last_record.usage.written
        breakpoints = last_record.breakpoints
        state.live_ttl = breakpoints[-1].ttl if breakpoints and state.last_cached else None
        turned = stored.last_turn_at
        state.idle_since = last_record.started_at if turned is None else turned
        state.recorded_upto = count
        state.own_write = next(
            ((bp.message, bp.block) for bp in reversed(breakpoints) if bp.message is not None),
            None,
        )
    return state


def resume_start(
    stored: StoredSession,
    *,
    config: Mapping[str, Any],
    tools: Sequence[Tool],
    mode: ToolsMode = "keep",
    rerun: bool = False,
    cost: CostFn,
) -> SessionStart:
    """Continue `stored` sending its prefix byte for byte (see `resume.reconcile`).

    A process that died between a tool_use and its result left the call unanswered:
    providers reject that, and a call whose result was stored is never run again, so
    the calls are answered with an "interrupted" error (or run again when `rerun`).
    """
    plan = reconcile(stored, config=config, tools=tools, mode=mode)
    state = restored_state(stored)
    prefix = stored.prefix
    events: list[Event] = []
    pending = stored.declared_break  # declared before a restart, not yet sent
    if plan.declared_break is not None:
        prefix, event = declared(
            prefix,
            Rebase(reason=plan.declared_break, tools=tuple(plan.implementations.values())),
            session_id=stored.id,
            state=state,
            cost=cost,
        )
        events.append(event)
        pending = plan.declared_break
        # The tools the agent itself defines are the runtime's now: a later reconcile
        # tells its own removed tool from a toolset that is down by this set.
        own = {"own_tools": list(config.get("own_tools") or ())}
        events.append(ConfigChanged(session_id=stored.id, changes=own))
    history = stored.messages
    last = history[-1] if history else None
    unanswered = last.tool_calls if isinstance(last, AssistantMessage) else ()
    if unanswered and not rerun:
        answer = tool_results(
            [
                ToolResultBlock(tool_use_id=c.id, content=INTERRUPTED, is_error=True)
                for c in unanswered
            ]
        )
        events.append(MessageAppended(session_id=stored.id, index=len(history), message=answer))
        state.chain.append(chain_step(state.chain[-1] if state.chain else EMPTY_CHAIN, answer))
        history, unanswered = (*history, answer), ()
    return SessionStart(
        session_id=stored.id,
        role=stored.role,
        prefix=prefix,
        history=history,
        root_id=stored.root_id or stored.id,
        parent_id=stored.parent_id,
        policy=policy_from_config(stored.config.get("policy")),
        max_iterations=stored.config.get("max_iterations"),
        state=state,
        events=tuple(events),
        declared_break=pending,
        extra_tools=plan.implementations,
        unanswered=unanswered,
        rerun=rerun,
        epoch=stored.epoch,
    )
