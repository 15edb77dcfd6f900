"""A session's keep-warm as values: what its idle gap looks like to the time policy, what
the policy plans for it (its own entry, or the agent's shared tools+system one), the
request a ping or seal sends, and what the records say about a gap afterwards.

`Session.warm_plan` and `Session.warm` call these with a `GapView` of the session and
its `CacheState`; nothing here holds or changes a session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import median

from stoker.agent import calls, explicit
from stoker.agent.fallback import sendable
from stoker.agent.seams import SessionAgent
from stoker.agent.state import CacheState
from stoker.agent.telemetry import CallFacts
from stoker.cache.fleet import shared_tokens
from stoker.cache.models import ModelInfo
from stoker.cache.planner import BlockRef, last_cacheable, stripped_from
from stoker.cache.pricing import input_units
from stoker.cache.record import build_record
from stoker.cache.time_policy import (
    Idle,
    TimePolicy,
    WarmPlan,
    decide,
    decide_shared,
    lifetimes,
)
from stoker.cache.tokens import estimate_tokens
from stoker.providers.base import CallContext, Completion
from stoker.wire.fingerprint import EMPTY_CHAIN
from stoker.wire.messages import Message, user_text
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Breakpoint, Request

log = logging.getLogger(__name__)

PLACEHOLDER = user_text("(keep-warm request: no answer is needed)")
"""The user message after a keep-warm's breakpoint: sent, never cached, never stored."""
PLACEHOLDER_TOKENS = estimate_tokens(PLACEHOLDER.content)


@dataclass(frozen=True, slots=True, kw_only=True)
class GapView(explicit.Owner):
    """A session between turns, as the time policy sees it. `settled`: nothing waits for
    the next call (no unanswered tool call, declared break or fallback detour), so what
    the session cached is what its next turn reads."""

    settled: bool


def plan(
    view: GapView, state: CacheState, agent: SessionAgent, *, gaps: Sequence[float] = ()
) -> WarmPlan | None:
    """What the time policy does before the session's entry expires: keep its own entry,
    or, when it lets that go and spoke last for its agent's fleet, the shared one."""
    own = own_plan(view, state, agent, gaps=gaps)
    if own is None or own.sends:
        return own
    shared = shared_plan(view, state, agent)
    return shared if shared is not None and shared.sends else own


def own_plan(
    view: GapView, state: CacheState, agent: SessionAgent, *, gaps: Sequence[float] = ()
) -> WarmPlan | None:
    """The plan for the session's own entry (main sessions and branches only: forks,
    reviews and sub-agents end soon)."""
    if view.role not in ("main", "branch") or not view.settled:
        return None
    info = view.info
    gap = idle(state, view.history, view.prefix, info)
    if gap is None:  # nothing cached to keep; an explicit cache held for nothing goes
        return explicit.stale(view, state, agent)
    policy = agent.cache_policy.keep_warm
    if state.warm_failed_at is not None:
        policy = replace(policy, enabled=False)  # once per gap: a failure is not retried
    price = info.input / 1_000_000 if info.input is not None else None
    gap = replace(gap, shared=kept_by_fleet(view, agent, policy))
    seen = [*state.gaps, *state.seen, *gaps]
    found = decide(gap, info, policy, gaps=seen, price=price)
    if state.warm_failed_at is not None:
        return found
    # The third kind of decision, for caches billed for storage (stoker.cache.storage):
    # it wins when it is worth more than the ping or seal, or deletes a cache held for
    # nothing.
    net, stored = explicit.plan(view, state=state, agent=agent, idle=gap, gaps=seen)
    warm = found.saves - found.cost if found.sends else 0.0
    if stored is not None and (stored.action == "cache_delete" or net > warm):
        return stored
    return found


def shared_plan(view: GapView, state: CacheState, agent: SessionAgent) -> WarmPlan | None:
    """The plan for the agent's shared tools+system entry, when this session made the
    fleet's last call and new sessions keep arriving."""
    fleet = agent.fleet.get(view.prefix)
    if fleet is None or fleet.last_user != view.session_id or len(fleet.arrivals) < 2:
        return None  # another session speaks for the fleet, or none has arrived since
    info = view.info
    menu = lifetimes(info)
    policy = agent.cache_policy.keep_warm
    if menu is None or state.warm_failed_at is not None or not policy.fleet:
        return None
    idle_gap = Idle(
        refreshed_at=fleet.last_use,
        live_for=fleet.live_for,
        idle_since=fleet.last_arrival,
        cached=shared_tokens(view.prefix),
        tail=0,
        long_lived=fleet.live_for >= menu.long,
        overhead=PLACEHOLDER_TOKENS,
        spent=fleet.spent,
        spent_usd=state.warm_spent_usd,
    )
    price = info.input / 1_000_000 if info.input is not None else None
    return decide_shared(idle_gap, info, policy, arrivals=fleet.gaps(), price=price)


def kept_by_fleet(view: GapView, agent: SessionAgent, policy: TimePolicy) -> int:
    """Tokens of the session's prefix its agent's new sessions keep warm anyway: the shared
    tools and system prompt, while new sessions typically arrive within the long TTL
    (their own calls, or the fleet's keep-warm, refresh that entry)."""
    menu = lifetimes(view.info)
    fleet = agent.fleet.get(view.prefix)
    if not policy.fleet or menu is None or fleet is None or len(fleet.arrivals) < 2:
        return 0
    return shared_tokens(view.prefix) if median(fleet.gaps()) <= menu.long else 0


def warm_record(
    view: GapView,
    state: CacheState,
    agent: SessionAgent,
    plan: WarmPlan,
    request: Request,
    completion: Completion,
    *,
    seq: int,
) -> CacheRecord:
    """The record of a keep-warm request, explained by its plan."""
    shared = plan.scope == "shared"
    record = build_record(
        session_id=view.session_id,
        seq=seq,
        role=view.role,
        provider=agent.provider.name,
        info=view.info,
        request=request if shared else replace(request, messages=view.history),
        previous=None,
        previous_started_at=None,
        started_at=completion.started_at,
        usage=completion.usage,
        history=EMPTY_CHAIN if shared or not state.chain else state.chain[-1],
        new_from=0 if shared else len(view.history),
        retries=completion.retries,
    )
    return explained(record, plan)


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
    ttl = state.live_ttl
    if ttl is None and info.warm_by_read and state.last_input_tokens:
        ttl = "5m"  # an implicit entry holds the last input, whatever the usage reported
    if state.last_started is None or state.idle_since is None or ttl is None:
        return None
    menu = lifetimes(info)
    live_for = 0.0 if menu is None else menu.long if ttl == "1h" else menu.short
    cached, tail = state.last_cached, unwritten_tokens(history, state.own_write)
    if info.warm_by_read:  # an implicit entry holds the whole last input (never reported)
        cached = max(cached, state.last_input_tokens)
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
        slack=state.account.slack,
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
    tools+system one with the plan's TTL, and the smallest output the provider allows
    (`ModelInfo.min_output`: 0 on Anthropic, 1 on Bedrock; the thinking budget plus one
    when extended thinking is on)."""
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
        max_tokens=info.min_output if budget is None else budget + 1,
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


async def keep_warm(
    view: GapView,
    state: CacheState,
    agent: SessionAgent,
    *,
    gaps: Sequence[float],
    mixed: bool,
    site: calls.CallSite,
    seq: int,
    facts: Callable[[str, Request], CallFacts],
) -> CacheRecord | None:
    """Send the session's planned keep-warm if it is due now; its record (with `state`
    and the fleet told what the cache now holds), or None. A failure is logged, marks the
    gap (no second try), and changes nothing else."""
    plan_ = plan(view, state, agent, gaps=gaps)
    now = agent.clock.now()
    if plan_ is None or not plan_.sends or now < plan_.at or state.last_started is None:
        return None
    if plan_.action in explicit.LIFECYCLE:  # an explicit cache: create, extend, delete
        return await explicit.carry_out(plan_, view, state=state, agent=agent, seq=seq, facts=facts)
    if now >= plan_.at + agent.cache_policy.keep_warm.margin:
        return None  # too late to be sure the entry is still there: let it go
    info = view.info
    key = calls.openai_key(agent, info, view.prefix, site.root_id)
    shared = plan_.scope == "shared"
    history: Sequence[Message] = () if shared else view.history
    if mixed:  # as the primary's requests send it (see `fallback.sendable`)
        history = sendable(history, to=info.provider, home=info.provider)[0]
    sent = request(plan_, history, view.prefix, info, cache_key=key)
    with agent.telemetry.call(facts(plan_.action, sent)) as span:
        try:
            completion = await agent.provider.complete(
                sent, CallContext(session_id=view.session_id)
            )
        except Exception as exc:  # a keep-warm must never hurt the session
            log.warning("keep-warm %s of session %s failed: %r", plan_.action, view.session_id, exc)
            span.failed(exc)
            state.warm_failed_at = now
            return None
        record = warm_record(view, state, agent, plan_, sent, completion, seq=seq)
        span.recorded(record)
    spent = input_units(completion.usage, info)
    if shared:  # the session's own entry is untouched: only the fleet's moved on
        agent.fleet.spend(view.prefix, spent)
    else:
        state.after_refresh(sent, record)
        state.warm_spent += spent
    calls.fleet_used(agent, site, sent, record.started_at)
    state.warm_spent_usd += record.cost_usd or 0.0
    return record
