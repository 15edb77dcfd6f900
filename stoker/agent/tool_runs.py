"""A turn's tool calls as a session runs them: what each advertised tool runs, the
context a tool is called in, and who decides its risky calls (an approver, recorded).

`Session` passes these functions its values (its prefix, policy, ids, hooks) and gets
results back; nothing here holds or changes a session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from stoker.agent.delegate import Delegator, running
from stoker.agent.seams import Callbacks, SessionAgent
from stoker.errors import ToolError
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
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock
from stoker.wire.events import ApprovalDecided
from stoker.wire.prefix import Prefix


def advertised(
    prefix: Prefix, agent: SessionAgent, known: Mapping[str, Tool] | None = None
) -> dict[str, Tool]:
    """What a call to each tool `prefix` advertises runs (an unadvertised tool is
    unknown): the agent's tool, else the one in `known`, else, when its toolset is not
    registered now, a stand-in answering that it is unavailable. An outage keeps the
    prefix as it is: dropping the tools would cost a rewrite when they go and another
    when they come back."""
    runtime = {t.name: t for t in agent.available_tools()}
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


def context(
    *, session_id: str, tool_use_id: str, role: str, parent_id: str | None, platform: str
) -> ToolContext:
    """What a tool learns of the call: its session, and where it runs (for provenance)."""
    return ToolContext(
        session_id=session_id,
        tool_use_id=tool_use_id,
        metadata={
            "origin": "background_review" if role == "review" else "foreground",
            "execution_context": role,
            "parent_session_id": parent_id,
            "platform": platform,
            "role": role,
        },
    )


def decided(
    session_id: str, request: ApprovalRequest, decision: ApprovalDecision
) -> ApprovalDecided:
    """The event that stores who allowed or refused a risky call (the history is as it was)."""
    return ApprovalDecided(
        session_id=session_id,
        tool=request.tool,
        tool_use_id=request.tool_use_id,
        summary=request.summary,
        approved=decision.approved,
        by=decision.by,
        reason=decision.reason,
        at=decision.at,
    )


async def run(
    calls: Sequence[ToolUseBlock],
    *,
    tools: Mapping[str, Tool],
    policy: DispatchPolicy | None,
    hooks: Callbacks,
    record: Callable[[ApprovalRequest, ApprovalDecision], Awaitable[None]],
    now: Callable[[], float],
    context_of: Callable[[str], ToolContext],
    delegator: Delegator,
) -> list[ToolResultBlock]:
    """One result per call, in call order; risky calls asked of the hooks' approver."""
    approvals = Approvals(approver=hooks.approver, record=record, now=now)
    with running(delegator):
        return await run_tool_calls(
            calls,
            tools,
            context_factory=lambda call: context_of(call.id),
            policy=policy,
            on_progress=hooks.on_tool,
            approvals=approvals,
        )
