"""When a history nears the model's context window, its older part becomes a summary.

The decisions, and the run itself (`compact`, given a fork to write the summary), live
here; `Session` adopts what a run returns. A compaction is a cache event like any
other: the summary is written by a fork that sends the session's exact prefix (so that
call reads the cache instead of paying for the history again), the compacted history
is a new lineage whose first call is a declared break, and when the cache has gone cold
over an idle gap the compaction comes earlier, since the next call rewrites the whole
history then anyway. Tool calls and their results are never split: the history is cut
only before a user message that answers nothing earlier.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from stoker.agent.state import CacheState
from stoker.cache.planner import BlockRef
from stoker.cache.tokens import count_tokens, estimate_tokens
from stoker.errors import CompactionError, ConfigError, StokerError
from stoker.wire.blocks import TextBlock
from stoker.wire.events import HistoryCompacted
from stoker.wire.fingerprint import EMPTY_CHAIN, chain_step
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.prefix import Prefix
from stoker.wire.request import Breakpoint
from stoker.wire.usage import Usage

SUMMARY_HEADER = "Summary of the earlier part of this conversation (written when it was compacted):"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """When a session compacts its history, and how much of it stays verbatim.

    Shares are of the model's context window (`window` overrides the model's, e.g. for
    a private model or a test). `idle_threshold` applies when the cache has gone cold
    over an idle gap: the next call rewrites the whole history anyway, so compacting
    then costs no extra write.
    """

    enabled: bool = True
    threshold: float = 0.8
    idle_threshold: float = 0.5
    keep: float = 0.25
    window: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.idle_threshold <= self.threshold <= 1:
            raise ConfigError(
                "compaction needs 0 < idle_threshold <= threshold <= 1 (shares of the "
                f"context window); got idle_threshold={self.idle_threshold}, "
                f"threshold={self.threshold}"
            )
        if not 0 < self.keep < self.idle_threshold:
            raise ConfigError(
                f"compaction keep={self.keep} must be above 0 and below idle_threshold "
                f"({self.idle_threshold}), or a compaction would not make room"
            )


def request_tokens(prefix: Prefix, history: Sequence[Message]) -> int:
    """An estimate of a request's input: tools, system prompt and history."""
    tools = sum(
        count_tokens(json.loads(spec)["name"]) + count_tokens(spec.decode())
        for spec in prefix.tools
    )
    return (
        tools + count_tokens(prefix.system) + estimate_tokens(b for m in history for b in m.content)
    )


def cut_points(history: Sequence[Message]) -> list[int]:
    """Indexes where the history may be cut: a user message that answers no tool call
    made before it (so no result loses its call, and no call its result), with at
    least one message before it."""
    points: list[int] = []
    open_calls: set[str] = set()
    for i, message in enumerate(history):
        if isinstance(message, UserMessage):
            answers = {r.tool_use_id for r in message.tool_results}
            if i > 0 and not open_calls and not answers:
                points.append(i)
            open_calls -= answers
        elif isinstance(message, AssistantMessage):
            open_calls |= {c.id for c in message.tool_calls}
    return points


def choose_cut(history: Sequence[Message], keep_tokens: int) -> int | None:
    """Where to cut: the earliest cut point whose verbatim tail fits in `keep_tokens`,
    else the latest one (the current turn stays whole); None when nothing can be cut."""
    points = cut_points(history)
    if not points:
        return None
    tail = 0
    sizes: dict[int, int] = {}
    for i in range(len(history) - 1, points[0] - 1, -1):
        tail += estimate_tokens(history[i].content)
        sizes[i] = tail
    fitting = [p for p in points if sizes[p] <= keep_tokens]
    return fitting[0] if fitting else points[-1]


def instruction(history: Sequence[Message], cut: int) -> str:
    """What the summarising fork is asked: everything before message `cut`, which the
    compacted conversation will no longer hold. (It names the cut by count, never by
    quoting a message: quoted words would be read as a request of their own.)"""
    kept = len(history) - cut
    return (
        "This conversation is about to be compacted to stay within the context window. "
        f"Everything before the last {kept} messages will be replaced by your summary; "
        "those messages stay as they are. Write the summary now, without calling tools: "
        "the user's goals and constraints, decisions made and why, facts and results the "
        "work depends on (file names, values, errors), and what was left to do. Be complete "
        "but brief; write only the summary."
    )


def compacted(summary: str, history: Sequence[Message], cut: int) -> tuple[Message, ...]:
    """The history after compaction: the summary opens the first kept user message (so
    roles still alternate), then the kept messages as they were."""
    first = history[cut]
    if not isinstance(first, UserMessage):
        raise ValueError(f"message {cut} is not a user message; it is no cut point")
    opening = UserMessage(
        content=(TextBlock(text=f"{SUMMARY_HEADER}\n\n{summary}"), *first.content)
    )
    return (opening, *history[cut + 1 :])


def due(size: int, window: int, policy: CompactionPolicy, *, cold_for: float | None) -> str | None:
    """Why the next call should compact first (None: it should not). `cold_for` is how
    long the cache has been cold (None while it is warm)."""
    if not policy.enabled or window <= 0:
        return None
    share = size / window
    if share >= policy.threshold:
        return (
            f"history at {share:.0%} of the {window:,}-token context window "
            f"(threshold {policy.threshold:.0%})"
        )
    if cold_for is not None and share >= policy.idle_threshold:
        return (
            f"history at {share:.0%} of the {window:,}-token context window and the cache "
            f"cold for {cold_for / 60:.0f} min (idle threshold {policy.idle_threshold:.0%}): "
            "the next call rewrites the history anyway, so compacting now costs no extra write"
        )
    return None


def summary_marks(
    planned: Sequence[Breakpoint], read_at: BlockRef | None
) -> tuple[Breakpoint, ...]:
    """The summary call's markers: tools+system as planned, and one on the parent's last
    write while it is warm, so the call reads the history and writes nothing after it
    (no request ever sends this history and instruction again)."""
    marks = [b for b in planned if b.message is None]
    if read_at is not None and planned:
        marks.append(Breakpoint(message=read_at[0], block=read_at[1], ttl=planned[-1].ttl))
    return tuple(marks)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """What a summarising fork answered: its text, whether it answered, its session id."""

    text: str
    answered: bool
    writer: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """A compaction's outcome, for the session to adopt: its new history, the event that
    stores it, and the cache state a resume of it starts from."""

    messages: tuple[Message, ...]
    event: HistoryCompacted
    state: CacheState


async def compact(
    *,
    session_id: str,
    prefix: Prefix,
    history: Sequence[Message],
    state: CacheState,
    keep_tokens: int,
    reason: str,
    summarise: Callable[[str], Awaitable[Summary]],
    cost: Callable[[Usage], float | None],
) -> Compacted:
    """Cut `history` before its older part and have `summarise` (a fork of the session
    with no tools) write what replaces it. Raises `CompactionError`, leaving everything
    as it was, when nothing can be cut or the summary fails."""
    cut = choose_cut(history, keep_tokens)
    if cut is None:
        raise CompactionError(
            f"session {session_id!r} has nothing to compact: its history has no earlier "
            "turn that can be summarised without splitting a tool call from its result"
        )
    try:
        summary = await summarise(instruction(history, cut))
    except StokerError as exc:
        raise CompactionError(
            f"session {session_id!r} was not compacted: the summary call failed ({exc}); "
            "the history is as it was"
        ) from exc
    text = summary.text.strip()
    if not summary.answered or not text:
        raise CompactionError(
            f"session {session_id!r} was not compacted: the summary came back empty; "
            "the history is as it was"
        )
    messages = compacted(text, history, cut)
    tokens = request_tokens(prefix, messages)
    event = HistoryCompacted(
        session_id=session_id,
        messages=messages,
        replaced=len(history),
        kept_from=cut,
        reason=reason,
        summarised_by=summary.writer,
        estimated_rewrite_tokens=tokens,
        estimated_cost_usd=cost(Usage(written_5m=tokens)),
    )
    chain: list[str] = []
    for m in messages:
        chain.append(chain_step(chain[-1] if chain else EMPTY_CHAIN, m))
    # What a resume of the stored session starts from: no write to plan against, no entry
    # to keep warm; the gaps and the spending stay the session's.
    fresh = CacheState(
        chain=chain,
        last_request=state.last_request,
        idle_since=state.idle_since,
        gaps=state.gaps,
        warm_spent_usd=state.warm_spent_usd,
    )
    return Compacted(messages=messages, event=event, state=fresh)
