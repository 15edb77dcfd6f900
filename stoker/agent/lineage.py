"""New lineages from an existing one: forks, branches, and resumes.

All three start from the exact prefix and history their source sends, so their first
request reads the source's cache. None of them can send other tools or another system
prompt unless a rebase declares the break.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from stoker.agent.resume import ToolsMode, reconcile
from stoker.agent.state import CacheState
from stoker.tools import DispatchPolicy, Tool, run_tool_calls
from stoker.wire.blocks import ToolResultBlock
from stoker.wire.events import EventSink, MessageAppended, SessionCreated
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import AssistantMessage, tool_results
from stoker.wire.prefix import Prefix
from stoker.wire.request import Request
from stoker.wire.stored import SessionSource, StoredSession

if TYPE_CHECKING:
    from stoker.agent.agent import Agent
    from stoker.agent.session import Session


class _Inherit:
    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Any = _Inherit()
"""Sentinel for fork arguments: keep the parent's value (distinct from None, which clears)."""

INTERRUPTED = (
    "interrupted: the process stopped before this tool call returned; it was not run again. "
    "Call it again if its result is still needed."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebase:
    """A deliberate prefix change for a fork, recorded as a declared break."""

    reason: str
    tools: tuple[Tool, ...] | None = None
    system: str | None = None
    model: str | None = None


def rebased_prefix(
    prefix: Prefix,
    *,
    tools: Sequence[Tool] | None = None,
    system: str | None = None,
    model: str | None = None,
) -> Prefix:
    """`prefix` with the given parts replaced (tools sorted by wire name, as always)."""
    if tools is not None:
        prefix = replace(
            prefix, tools=tuple(t.spec_bytes for t in sorted(tools, key=lambda t: t.name))
        )
    if system is not None:
        prefix = replace(prefix, system=system)
    if model is not None:
        prefix = prefix.with_params(model=model)
    return prefix


def fork(
    parent: Session,
    *,
    instruction: str,
    policy: DispatchPolicy | None = INHERIT,
    kind: str = "fork",
    max_iterations: int | None = None,
    rebase: Rebase | None = None,
    sink: EventSink | None = None,
) -> Session:
    """A child that sends exactly `parent`'s prefix and history, plus `instruction`."""
    narrowed = (
        parent.policy if policy is INHERIT or policy is None else parent.policy.narrow_to(policy)
    )
    child = type(parent)(
        agent=parent.agent,
        session_id=f"{parent.id}.{kind}-{uuid.uuid4().hex[:8]}",
        prefix=parent.prefix,
        history=list(parent.history),
        sink=sink or parent.sink,
        kind=kind,
        parent=parent,
        policy=narrowed,
        max_iterations=max_iterations,
        state=parent.state.copy(),
        tools=parent.tools,
    )
    child.instruction = instruction
    child.queue(
        SessionCreated(
            session_id=child.id,
            prefix=child.prefix,
            parent_id=parent.id,
            kind=kind,
            config={
                **parent.agent.config_snapshot(),
                "root_id": child.root_id,
                "forked_at": len(parent.history),
            },
            created_at=parent.agent.clock.now(),
        )
    )
    if rebase is not None:
        prefix = rebased_prefix(
            child.prefix, tools=rebase.tools, system=rebase.system, model=rebase.model
        )
        child.declare(prefix, rebase.reason, extra_tools={t.name: t for t in rebase.tools or ()})
    return child


def branch(source: Session, *, at: int | None = None, sink: EventSink | None = None) -> Session:
    """A new session with `source`'s prefix and its first `at` messages (all when None).

    The branch is stored self-contained (its messages are copied as events), keeps the
    lineage's cache key, and its first request reads what `source` wrote for that history.
    """
    count = len(source.history) if at is None else at
    history = list(source.history[:count])
    state = source.state.copy()
    state.chain = state.chain[:count]
    state.render_memo = {}
    if state.rolling is not None and state.rolling[0] >= count:
        state.rolling = None
    # Explain the branch's first call against its branch point, not the source's latest
    # request: a branch diverges from the source's future by design, not by accident.
    state.last_request = Request(prefix=source.prefix, messages=tuple(history))
    state.recorded_upto = count
    child = type(source)(
        agent=source.agent,
        session_id=uuid.uuid4().hex,
        prefix=source.prefix,
        history=history,
        sink=sink or source.sink,
        kind="branch",
        parent=source,
        state=state,
        tools=source.tools,
    )
    child.queue(
        SessionCreated(
            session_id=child.id,
            prefix=child.prefix,
            parent_id=source.id,
            kind="branch",
            config={
                **source.agent.config_snapshot(),
                "root_id": child.root_id,
                "branched_at": count,
            },
            created_at=source.agent.clock.now(),
        )
    )
    for i, m in enumerate(history):
        child.queue(MessageAppended(session_id=child.id, index=i, message=m))
    return child


def _restored_state(stored: StoredSession) -> CacheState:
    chain: list[str] = []
    for m in stored.messages:
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, m))
    state = CacheState(chain=chain)
    last_record, stored_messages, prefix = stored.last_record, stored.messages, stored.prefix
    if last_record is not None:
        count = last_record.fingerprints.message_count
        state.last_request = Request(
            prefix=prefix, messages=stored_messages[:count], breakpoints=last_record.breakpoints
        )
        state.last_started = last_record.started_at
        state.last_written = last_record.usage.written
        state.last_input_tokens = last_record.usage.input_total
        state.recorded_upto = count
        for bp in reversed(last_record.breakpoints):
            if bp.message is not None:
                state.rolling = (bp.message, bp.block)
                break
    return state


async def resume(
    session_cls: type[Session],
    session_id: str,
    agent: Agent,
    *,
    store: SessionSource,
    tools: ToolsMode = "keep",
    interrupted: Literal["record", "rerun"] = "record",
) -> Session:
    """Continue a stored session with `agent`, sending the stored prefix byte for byte."""
    stored = await store.load(session_id)
    plan = reconcile(stored, agent, tools=tools)
    session = session_cls(
        agent=agent,
        session_id=stored.id,
        prefix=stored.prefix,
        history=list(stored.messages),
        sink=store,
        kind=stored.kind,
        root_id=stored.root_id or stored.id,
        state=_restored_state(stored),
        tools=plan.implementations,
    )
    if stored.pending_break is not None:
        session.declared = stored.pending_break  # declared before a restart, not yet sent
    if plan.rebase_reason is not None:
        session.declare(plan.prefix, plan.rebase_reason, extra_tools=plan.implementations)
        await session.flush()
    last = stored.messages[-1] if stored.messages else None
    if isinstance(last, AssistantMessage) and last.tool_calls:
        # The process died between a tool_use and its result: providers reject an
        # unanswered tool_use, and a call whose result was stored is never re-run.
        if interrupted == "rerun":
            results = await run_tool_calls(
                last.tool_calls,
                session.tools,
                context_factory=lambda call: session.tool_context(call.id),
                policy=session.policy,
            )
        else:
            results = [
                ToolResultBlock(tool_use_id=c.id, content=INTERRUPTED, is_error=True)
                for c in last.tool_calls
            ]
        await session.append(tool_results(results))
    return session
