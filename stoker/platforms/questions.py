"""Questions with buttons: what a chat's user is asked mid-turn, and how a press answers.

A risky tool call of a chat's turn is asked as "Allow ...?" with Allow / Deny buttons
(`approver`); only the chat's user can answer, and no answer within the gateway's
approval timeout denies. A press that is not the asker's, or that comes after the answer,
is acknowledged with a note only its presser sees, and changes nothing; the answer edits
the question to show it (its buttons gone). Questions live in the process that asked
them: a press on another replica finds none open.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from stoker.gateway.approvals import PendingApprovals
from stoker.platforms.base import Adapter, ButtonPress, ChatKey, ChatRef, Context, MessageRef
from stoker.tools import ApprovalDecision, ApprovalRequest, Approver, ToolContext
from stoker.tools.approval import BY_TIMEOUT

APPROVAL_CHOICES = ("Allow", "Deny")
NOT_OPEN = "This question is no longer open."
NOT_YOURS = "This question is not yours to answer."


@dataclass
class _Question:
    key: ChatKey
    question: str
    choices: tuple[str, ...]
    answer: asyncio.Future[str]
    message: MessageRef | None = None


class Questions:
    """The questions one platform's bridge has open, by the token their buttons carry."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self._open: dict[str, _Question] = {}

    async def ask(
        self, key: ChatKey, question: str, choices: Sequence[str], *, wait: float
    ) -> str | None:
        """Ask the user of `key` to pick one of `choices`; their pick, or None when they
        did not answer within `wait` seconds (the question then says so)."""
        token = secrets.token_urlsafe(9)
        q = _Question(
            key=key,
            question=question,
            choices=tuple(choices),
            answer=asyncio.get_running_loop().create_future(),
        )
        self._open[token] = q
        chat = ChatRef(chat=key.chat, thread=key.thread)
        try:
            q.message = await self.adapter.ask(Context(), chat, question, q.choices, token)
            return await asyncio.wait_for(asyncio.shield(q.answer), wait)
        except TimeoutError:
            if q.message is not None:
                await self.adapter.edit(Context(), q.message, f"{question}\n(no answer in time)")
            return None
        finally:
            self._open.pop(token, None)

    async def press(self, press: ButtonPress) -> None:
        """A button pressed: the asker's press answers its open question."""
        ctx = Context(update=press.id)
        q = self._open.get(press.question)
        if q is None or q.answer.done():
            await self.adapter.pressed(ctx, press, NOT_OPEN)
            return
        if press.key.user != q.key.user or not 0 <= press.choice < len(q.choices):
            await self.adapter.pressed(ctx, press, NOT_YOURS)
            return
        choice = q.choices[press.choice]
        q.answer.set_result(choice)
        await self.adapter.pressed(ctx, press, choice)
        if q.message is not None:
            await self.adapter.edit(ctx, q.message, f"{q.question}\n→ {choice}")

    def cancel(self) -> None:
        """Stop waiting on every open question (the bridge is stopping)."""
        for q in self._open.values():
            if not q.answer.done():
                q.answer.cancel()

    def approver(self, key: ChatKey, pending: PendingApprovals) -> Approver:
        """Risky tool calls of `key`'s turn, asked in its chat under `pending`'s timeout
        and clock; each decision records who made it."""

        async def approve(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
            question = f"Allow {request.summary}?"
            choice = await self.ask(key, question, APPROVAL_CHOICES, wait=pending.timeout)
            now = pending.clock.now()
            if choice is None:
                return ApprovalDecision(
                    approved=False, by=BY_TIMEOUT, reason="nobody answered in time", at=now
                )
            by = f"user:{key.gateway_user}"
            return ApprovalDecision(approved=choice == APPROVAL_CHOICES[0], by=by, at=now)

        return approve
