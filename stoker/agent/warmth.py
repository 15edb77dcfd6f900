"""A session's keep-warm as values: what its idle gap looks like to the time policy, the
request a ping or seal sends, and what the records say about a gap afterwards.

`Session.warm_plan` and `Session.warm` call these with the session's state and history;
nothing here holds or changes a session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from stoker.agent.state import CacheState
from stoker.cache.models import ModelInfo
from stoker.cache.planner import BlockRef, last_cacheable, stripped_from
from stoker.cache.time_policy import Idle, WarmPlan, lifetimes
from stoker.cache.tokens import estimate_tokens
from stoker.wire.messages import Message, user_text
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Breakpoint, Request
from stoker.wire.usage import Usage

PLACEHOLDER = user_text("(keep-warm request: no answer is needed)")
"""The user message after a keep-warm's breakpoint: sent, never cached, never stored."""
PLACEHOLDER_TOKENS = estimate_tokens(PLACEHOLDER.content)


def target(
    history: Sequence[Message], prefix: Prefix, info: ModelInfo
) -> tuple[BlockRef | None, bool]:
    """Where a keep-warm's breakpoint goes, and whether it is a cut: the end of the history,
    or, on a model that drops earlier thinking at a new turn (a keep-warm is one), the last
    block before the first thinking it drops (the next turn reads no further anyway)."""
    if prefix.params.thinking_budget is not None and info.strips_thinking:
        cut = stripped_from((*history, PLACEHOLDER))
        if cut is not None:
            return cut, True
    return last_cacheable(history), False


def idle(
    state: CacheState, history: Sequence[Message], prefix: Prefix, info: ModelInfo
) -> Idle | None:
    """The gap as the time policy sees it (None before the first call)."""
    if state.last_started is None or state.idle_since is None or state.live_ttl is None:
        return None
    menu = lifetimes(info)
    live_for = 0.0 if menu is None else menu.long if state.live_ttl == "1h" else menu.short
    cached, tail = state.last_cached, unwritten_tokens(history, state.own_write)
    at, cut = target(history, prefix, info)
    own = state.own_write
    if cut:  # only the prefix up to the cut will be read, and it was written at the turn
        tail = 0
        if at is not None and own is not None and own > at:  # the last entry covers more
            after = [b for m in history[at[0] + 1 : own[0] + 1] for b in m.content]
            cached = max(0, cached - estimate_tokens(after))
    return Idle(
        refreshed_at=state.last_started,
        live_for=live_for,
        idle_since=state.idle_since,
        cached=cached,
        tail=tail,
        long_lived=state.live_ttl == "1h",
        overhead=PLACEHOLDER_TOKENS,
        spent=state.warm_spent,
        spent_usd=state.warm_spent_usd,
    )


def unwritten_tokens(history: Sequence[Message], written: BlockRef | None) -> int:
    """Tokens of the history after the newest entry (what a keep-warm writes)."""
    if written is None:
        return estimate_tokens(b for m in history for b in m.content)
    message, block = written
    rest = [b for m in history[message + 1 :] for b in m.content]
    if message < len(history):
        rest += list(history[message].content[block + 1 :])
    return estimate_tokens(rest)


def request(
    plan: WarmPlan,
    history: Sequence[Message],
    prefix: Prefix,
    info: ModelInfo,
    *,
    cache_key: str | None,
) -> Request:
    """The history as sent up to the message the breakpoint ends (anything after it would
    be billed as new input on every keep-warm), the placeholder, that breakpoint and the
    tools+system one with the plan's TTL, and the smallest output the provider allows (0
    unless extended thinking is on, which needs room for its budget)."""
    at, _ = target(history, prefix, info)
    sent = tuple(history[: at[0] + 1] if at is not None else history)
    # The tools+system marker too: a read refreshes the entries of the markers it covers,
    # and that one is what the agent's new sessions read first.
    markers = [Breakpoint(message=None, ttl=plan.ttl)]
    if at is not None:
        markers.append(Breakpoint(message=at[0], block=at[1], ttl=plan.ttl))
    budget = prefix.params.thinking_budget
    return Request(
        prefix=prefix,
        messages=(*sent, PLACEHOLDER),
        max_tokens=0 if budget is None else budget + 1,
        breakpoints=tuple(markers),
        cache_key=cache_key,
    )


def explained(record: CacheRecord, plan: WarmPlan) -> CacheRecord:
    """A keep-warm's record: its purpose, and what it kept (or that the entry was gone)."""
    explanation = (
        Explanation(verdict="kept_warm", detail=plan.reason)
        if record.usage.read
        else Explanation(verdict="expired", detail="the entry was gone: " + plan.reason)
    )
    return replace(record, purpose=plan.action, explanation=explanation)


def after_gap(record: CacheRecord, plan: WarmPlan | None) -> CacheRecord:
    """The first call after a gap whose entry expired: whether the time policy chose that
    (and why), or meant to keep it warm and nothing sent the keep-warm."""
    if plan is None or record.explanation.verdict != "expired":
        return record
    if plan.sends:
        note = (
            f"; the time policy planned a {plan.action} but none was sent (run a "
            "stoker.agent.keepwarm.KeepWarm, or stoker chat / stoker serve)"
        )
        classification = "keep-warm not run"
    else:
        note = f"; the time policy let it expire: {plan.reason}"
        classification = "time policy"
    explanation = replace(
        record.explanation,
        detail=record.explanation.detail + note,
        classification=classification,
    )
    return replace(record, explanation=explanation)


def after_stripping(
    record: CacheRecord, messages: Sequence[Message], prefix: Prefix, info: ModelInfo
) -> CacheRecord:
    """Say so when the model dropped earlier thinking: the history after it reads as new
    to the provider, whatever Stoker does (a cost of the model, not a miss)."""
    if prefix.params.thinking_budget is None or not info.strips_thinking:
        return record
    cut = stripped_from(messages)
    if cut is None:
        return record
    note = (
        f"; {prefix.params.model} drops earlier thinking at a new turn, so the history "
        f"after messages[{cut[0]}] was written again"
    )
    detail = record.explanation.detail + note
    return replace(record, explanation=replace(record.explanation, detail=detail))


def units(usage: Usage, info: ModelInfo) -> float:
    """Input of `usage` in base-input tokens (what the time policy counts)."""
    return (
        usage.uncached
        + info.write_5m * usage.written_5m
        + info.write_1h * usage.written_1h
        + info.read * usage.read
    )
