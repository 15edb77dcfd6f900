"""Asking someone before a risky tool runs: the request, the decision, the `Approver` seam.

A run that has someone to ask (a terminal, a platform's buttons, an HTTP client reading
the turn's stream) gives the dispatcher an `Approver`. The dispatcher asks it about each
call of a `risky` tool that the dispatch policy allows, after the arguments validated and
before the tool runs; a denial comes back to the model as an `is_error` tool result, never
as an exception that ends the turn. An approver that raises denies (`by="error"`), one
that raises `TimeoutError` denies with `by="timeout"`.

Waiting changes nothing that is sent: the question is asked between two provider calls,
and its answer only decides the text of one tool result, which goes after the prefix and
the history that was already sent. A run whose policy denies risky tools (a background
review) never asks: the policy decides, and says so (`by="policy:background"`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from stoker.tools.context import ToolContext
from stoker.wire.blocks import ToolUseBlock

logger = logging.getLogger(__name__)

SUMMARY_CHARS = 160
"""The longest one-line summary: enough for a prompt or a button's caption."""

BY_POLICY = "policy:background"
BY_TIMEOUT = "timeout"
BY_ERROR = "error"
BY_NOBODY = "no approver"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A risky call waiting for a decision. `arguments` is the JSON text exactly as the
    model sent it; `summary` is one line for a prompt, e.g. `add_note(text="ship friday")`."""

    tool: str
    tool_use_id: str
    arguments: str
    summary: str
    session_id: str = ""

    @classmethod
    def of(
        cls, call: ToolUseBlock, arguments: Mapping[str, Any], *, session_id: str = ""
    ) -> ApprovalRequest:
        """The request for `call`, whose validated `arguments` make the summary."""
        return cls(
            tool=call.name,
            tool_use_id=call.id,
            arguments=call.input_json,
            summary=summarize(call.name, arguments),
            session_id=session_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """Run it or not, and who decided: "user:alice", "timeout", "policy:background",
    "no approver", "error". `at` is when (seconds since the epoch)."""

    approved: bool
    by: str
    reason: str = ""
    at: float = 0.0


class Approver(Protocol):
    """Decides one risky call. It may wait as long as it likes (a turn waits with it); it
    gets the call's `ToolContext` (session, role, platform) to know where it comes from."""

    def __call__(
        self, request: ApprovalRequest, context: ToolContext
    ) -> Awaitable[ApprovalDecision]: ...


DecisionSink = Callable[[ApprovalRequest, ApprovalDecision], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Approvals:
    """What a run does with risky calls: ask `approver` when there is one (None: they run
    as the policy allows, as before approvals existed) and hand every decision, the
    policy's included, to `record`. `now` stamps the decisions the dispatcher makes
    (the session passes its agent's clock)."""

    approver: Approver | None = None
    record: DecisionSink | None = None
    now: Callable[[], float] = time.time


async def ask(
    approver: Approver, request: ApprovalRequest, context: ToolContext, now: Callable[[], float]
) -> ApprovalDecision:
    """`approver`'s decision; a deny when it raises or returns something else."""
    try:
        decision = await approver(request, context)
    except TimeoutError:
        return ApprovalDecision(
            approved=False, by=BY_TIMEOUT, reason="nobody answered in time", at=now()
        )
    except Exception as exc:
        logger.warning(
            "the approver failed on %s (call %s): %r", request.tool, request.tool_use_id, exc
        )
        reason = f"the approver failed: {type(exc).__name__}: {exc}"
        return ApprovalDecision(approved=False, by=BY_ERROR, reason=reason, at=now())
    if not isinstance(decision, ApprovalDecision):
        reason = f"the approver returned {type(decision).__name__}, not an ApprovalDecision"
        return ApprovalDecision(approved=False, by=BY_ERROR, reason=reason, at=now())
    return decision


def refusal(tool: str, decision: ApprovalDecision) -> str:
    """The tool result the model reads when `decision` denied a call of `tool`."""
    why = f": {decision.reason}" if decision.reason else ""
    if decision.by.startswith("user:") or decision.by == "user":
        head = f"the user denied {tool} ({decision.by}){why}"
    else:
        head = f"{tool} was not approved ({decision.by}){why}"
    return f"{head}. It did not run; do not call it again for this, say what it would have done."


def summarize(name: str, arguments: Mapping[str, Any]) -> str:
    """`name(key=value, ...)` on one line, values as JSON, cut to `SUMMARY_CHARS`."""
    parts = []
    for key, value in arguments.items():
        try:
            shown = json.dumps(value, ensure_ascii=False, default=str)
        except ValueError:
            shown = repr(value)
        parts.append(f"{key}={shown}")
    line = f"{name}({', '.join(parts)})".replace("\n", " ").replace("\r", " ")
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"
