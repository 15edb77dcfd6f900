"""Background review: after a turn, a fork decides whether to save memory or skills.

The review is `session.fork(...)`, so its requests carry exactly the parent's prefix
(tools, system, params including thinking/effort) and history: it reads the parent's
cache instead of rewriting it at write prices (a review fork that sends fewer tools
than its parent reads nothing and rewrites everything, every review). Its policy allows
only the memory and skill tools and denies risky approvals; it writes nothing to the
parent's history; its failures are logged and reported, never raised into the turn.
The user sees one summary line built from tool results the snapshot did not have.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from stoker.agent.loop import TurnResult
from stoker.agent.starts import Inherit, Rebase
from stoker.tools import DispatchPolicy
from stoker.wire.messages import Message, UserMessage
from stoker.wire.prefix import Prefix

logger = logging.getLogger(__name__)

ReviewTopic = Literal["memory", "skills", "both"]


class ReviewFork(Protocol):
    """A review's fork, as the review uses it."""

    @property
    def id(self) -> str: ...

    @property
    def history(self) -> tuple[Message, ...]: ...

    async def send(self, text: str) -> TurnResult[Any]: ...


class Reviewable(Protocol):
    """The session a review looks back over (a `Session`)."""

    @property
    def id(self) -> str: ...

    @property
    def prefix(self) -> Prefix: ...

    def fork(
        self,
        *,
        policy: DispatchPolicy | Inherit = ...,
        role: str = ...,
        max_iterations: int | Inherit | None = ...,
        rebase: Rebase | None = ...,
    ) -> ReviewFork: ...


REVIEW_TOOLS = frozenset({"memory", "skill_view", "skill_manage"})

PROMPTS: dict[ReviewTopic, str] = {
    "memory": (
        "Background review (the user does not see this). Look back over the conversation: "
        "did you learn something durable about the user or the work that a future "
        "conversation should know? If so, save it with the memory tool, one short entry "
        "each; if nothing qualifies, reply 'nothing to save'."
    ),
    "skills": (
        "Background review (the user does not see this). Look back over the tool work in "
        "this conversation: was there a procedure worth reusing? If so, create or update a "
        "skill with skill_manage (check existing ones with skill_view first); otherwise "
        "reply 'nothing to save'."
    ),
    "both": (
        "Background review (the user does not see this). Look back over the conversation. "
        "1) Durable facts about the user or the work: save them with the memory tool. "
        "2) A reusable procedure from the tool work: create or update a skill with "
        "skill_manage. If nothing qualifies, reply 'nothing to save'."
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewConfig:
    """When to review. 0 turns a review off.

    `model` runs reviews on a cheaper model. That is another cache namespace: the review
    cannot read the parent's cache and writes its whole prefix at write prices every
    time, so it only pays when the price gap is larger than the lost reads.
    """

    memory_every: int = 0  # user turns between memory reviews
    skills_every: int = 0  # tool iterations between skill reviews
    model: str | None = None
    max_iterations: int = 16
    allowed_tools: frozenset[str] = REVIEW_TOOLS


@dataclass(slots=True)
class ReviewCounters:
    user_turns: int = 0
    tool_iterations: int = 0

    def after_turn(self, iterations: int, config: ReviewConfig) -> ReviewTopic | None:
        """Count a finished turn; return which review is due, resetting its counter."""
        self.user_turns += 1
        self.tool_iterations += max(iterations - 1, 0)
        memory = config.memory_every > 0 and self.user_turns >= config.memory_every
        skills = config.skills_every > 0 and self.tool_iterations >= config.skills_every
        if memory:
            self.user_turns = 0
        if skills:
            self.tool_iterations = 0
        if memory and skills:
            return "both"
        return "memory" if memory else "skills" if skills else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewOutcome:
    topic: ReviewTopic
    summary: str
    session_id: str
    error: BaseException | None = field(default=None, compare=False)


_LABEL = re.compile(
    r"^(Memory updated|User profile updated|Skill '[^']+' (?:created|updated|deleted))"
)


def summarize(snapshot: Sequence[Message], history: Sequence[Message]) -> str:
    """One line of what the review changed, from tool results the snapshot did not have
    (matched by tool-call id, else by content), each label once."""
    seen_ids: set[str] = set()
    seen_content: set[str] = set()
    for m in snapshot:
        if isinstance(m, UserMessage):
            for r in m.tool_results:
                seen_ids.add(r.tool_use_id)
                seen_content.add(r.content)
    labels: list[str] = []
    for m in history[len(snapshot) :]:
        if not isinstance(m, UserMessage):
            continue
        for r in m.tool_results:
            if r.is_error or r.tool_use_id in seen_ids or r.content in seen_content:
                continue
            found = _LABEL.match(r.content)
            label = found.group(1) if found else None
            if label and label not in labels:
                labels.append(label)
    return " · ".join(labels)


def review_fork(session: Reviewable, config: ReviewConfig) -> ReviewFork:
    """The review's fork of `session` as it is now: its prefix and history, allowed only
    the review tools. Made when the turn ends, not when the review task first runs, so a
    turn or a rebase that follows meanwhile cannot change what the review starts from."""
    rebase = None
    if config.model is not None and config.model != session.prefix.params.model:
        rebase = Rebase(
            reason=f"review on {config.model}: another model is another cache namespace",
            model=config.model,
        )
    return session.fork(
        policy=DispatchPolicy(
            allowed=config.allowed_tools, deny_risky=True, reason="background review"
        ),
        role="review",
        max_iterations=config.max_iterations,
        rebase=rebase,
    )


async def run_review(
    fork: ReviewFork,
    topic: ReviewTopic,
    *,
    on_summary: Callable[[str], object] | None = None,
    on_error: Callable[[BaseException], object] | None = None,
) -> ReviewOutcome:
    """Run one review fork to completion; never raises (except cancellation)."""
    snapshot = fork.history
    try:
        await fork.send(PROMPTS[topic])
    except Exception as exc:
        logger.warning("background %s review %s failed: %r", topic, fork.id, exc)
        if on_error is not None:
            on_error(exc)
        return ReviewOutcome(topic=topic, summary="", session_id=fork.id, error=exc)
    summary = summarize(snapshot, fork.history)
    if summary and on_summary is not None:
        on_summary(summary)
    return ReviewOutcome(topic=topic, summary=summary, session_id=fork.id)


class BackgroundReviews:
    """A session's review counters and the review tasks it has not drained yet."""

    def __init__(self) -> None:
        self.counters = ReviewCounters()
        self.pending: list[asyncio.Task[ReviewOutcome]] = []

    def after_turn(
        self,
        session: Reviewable,
        result: TurnResult[Any],
        config: ReviewConfig,
        *,
        on_summary: Callable[[str], object] | None = None,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> None:
        """Count the turn; start the review it makes due, in the background."""
        topic = self.counters.after_turn(result.iterations, config)
        if topic is None:
            return
        fork = review_fork(session, config)
        task = asyncio.create_task(
            run_review(fork, topic, on_summary=on_summary, on_error=on_error),
            name=f"stoker-review-{session.id}",
        )
        self.pending.append(task)

    async def drain(self) -> list[ReviewOutcome]:
        tasks, self.pending = self.pending, []
        return list(await asyncio.gather(*tasks)) if tasks else []
