"""Approvals over HTTP: a streamed message's risky tool call waits for its owner's answer.

While the turn of a streamed message (`?stream=true` or `Accept: text/event-stream`)
waits, its stream carries an `approval` event: the approval's `id`, the `tool`, its
`arguments` as the model sent them, a one-line `summary` and `expires_at` (seconds since
the epoch). The session's owner answers with `POST /v1/sessions/{sid}/approvals/{id}`
and `{"decision": "approve" | "deny", "reason"?: "..."}`; the decision is stored as an
`approval_decided` event with `by="user:<id>"`. No answer by `expires_at` denies, stored
with `by="timeout"`; an answer after that, or a second answer, is a 409.

A message that is not streamed (and the OpenAI-compatible endpoints) has nobody to show
the question to: its risky calls are denied at once, stored with `by="no approver"`,
and the model is told to say what it would have done.

The waiting call lives in the process that runs the turn: an answer sent to another
replica finds nothing there and gets a 404 that says so. Route a session's requests to
one replica (the agent cache wants that anyway), or send the answer to the replica that
serves the stream.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stoker.clock import Clock
from stoker.gateway.errors import ApprovalNotFound, Conflict, shown
from stoker.tools import ApprovalDecision, ApprovalRequest, Approver, ToolContext
from stoker.tools.approval import BY_NOBODY, BY_TIMEOUT

DEFAULT_TIMEOUT = 240.0
"""Seconds an approval waits: under the 5-minute cache lifetime of the call that asked,
so the call after an answer (or after the timeout) still reads everything before it."""

FINISHED_KEPT = 1024  # answered or expired ids remembered, so a late answer is a 409

Show = Callable[[dict[str, Any]], object]
"""Puts one `approval` event on the stream of the message whose turn asks."""


@dataclass(slots=True, kw_only=True)
class _Waiting:
    user: str
    session_id: str
    answer: asyncio.Future[ApprovalDecision]


class PendingApprovals:
    """The approvals this process's streamed turns wait for, and the last ones answered."""

    def __init__(self, *, clock: Clock, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.clock = clock
        self.timeout = timeout
        self._waiting: dict[str, _Waiting] = {}
        self._finished: OrderedDict[str, tuple[str, ApprovalDecision]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._waiting)

    async def unattended(self, request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
        """The approver of a message that is not streamed: nobody sees the question."""
        return ApprovalDecision(
            approved=False,
            by=BY_NOBODY,
            reason="nobody could be asked: only a message streamed from "
            "/v1/sessions/{sid}/messages?stream=true can approve risky tools",
            at=self.clock.now(),
        )

    def approver(self, user: str, session_id: str, show: Show) -> Approver:
        """The approver of one streamed message of `user` in `session_id`."""

        async def ask(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
            approval_id = secrets.token_urlsafe(16)
            answer: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
            self._waiting[approval_id] = _Waiting(user=user, session_id=session_id, answer=answer)
            show(self._event(approval_id, request))
            try:
                return await asyncio.wait_for(asyncio.shield(answer), self.timeout)
            except TimeoutError:
                decision = ApprovalDecision(
                    approved=False,
                    by=BY_TIMEOUT,
                    reason=f"no answer within {self.timeout:g} seconds",
                    at=self.clock.now(),
                )
                self._finish(approval_id, decision)
                return decision
            finally:
                self._waiting.pop(approval_id, None)  # a cancelled turn asks nobody any more

        return ask

    def _event(self, approval_id: str, request: ApprovalRequest) -> dict[str, Any]:
        return {
            "id": approval_id,
            "tool": request.tool,
            "tool_use_id": request.tool_use_id,
            "arguments": json.loads(request.arguments),  # validated before anyone is asked
            "summary": request.summary,
            "expires_at": self.clock.now() + self.timeout,
        }

    def answer(
        self, user: str, session_id: str, approval_id: str, *, approve: bool, reason: str = ""
    ) -> ApprovalDecision:
        """Answer a waiting approval as `user`: 404 when none of theirs waits under this
        id in this session, 409 when it was already answered or expired."""
        waiting = self._waiting.get(approval_id)
        if waiting is None or waiting.answer.done():
            finished = self._finished.get(approval_id)
            if finished is not None and finished[0] == session_id:
                raise Conflict(_settled(approval_id, finished[1]))
            raise ApprovalNotFound(session_id, approval_id)
        if waiting.user != user or waiting.session_id != session_id:
            raise ApprovalNotFound(session_id, approval_id)
        decision = ApprovalDecision(
            approved=approve, by=f"user:{user}", reason=reason, at=self.clock.now()
        )
        waiting.answer.set_result(decision)
        self._finish(approval_id, decision)
        return decision

    def _finish(self, approval_id: str, decision: ApprovalDecision) -> None:
        waiting = self._waiting.pop(approval_id, None)
        if waiting is None:
            return
        self._finished[approval_id] = (waiting.session_id, decision)
        while len(self._finished) > FINISHED_KEPT:
            self._finished.popitem(last=False)


def _settled(approval_id: str, decision: ApprovalDecision) -> str:
    if decision.by == BY_TIMEOUT:
        return f"approval {shown(approval_id, 64)} expired and was denied; it cannot be answered"
    verdict = "approved" if decision.approved else "denied"
    return f"approval {shown(approval_id, 64)} was already {verdict} by {decision.by}"


def decision_view(approval_id: str, decision: ApprovalDecision) -> dict[str, Any]:
    return {
        "id": approval_id,
        "approved": decision.approved,
        "by": decision.by,
        "reason": decision.reason,
        "at": decision.at,
    }
