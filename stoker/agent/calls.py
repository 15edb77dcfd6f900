"""One measured model call: the request a session sends next, the answer (from the
fallback chain while the provider asked is unavailable), and the call's cache record.

A session hands these functions a `CallSite`, a value of what the call needs to know of
it, and applies what they return (the record, a detour, a declared break) itself: nothing
here holds or changes a session. The agent-wide services a call reports to (the fleet's
arrivals, the OpenAI key shards' request rate) are the agent's, not the session's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from stoker.agent import explicit
from stoker.agent.compaction import summary_marks
from stoker.agent.fallback import Detour, Route, sendable, transient, why
from stoker.agent.seams import SessionAgent
from stoker.agent.state import CacheState
from stoker.cache.keys import cache_key
from stoker.cache.models import ModelInfo
from stoker.cache.planner import (
    BlockRef,
    CachePolicy,
    anchor_ttl,
    child_policy,
    plan,
    stripped_from,
)
from stoker.cache.record import build_record
from stoker.cache.time_policy import lifetimes, retention
from stoker.errors import ProviderError
from stoker.providers.base import CallContext, Completion
from stoker.wire.fingerprint import EMPTY_CHAIN
from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request, Ttl

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSite(explicit.Owner):
    """A session as its next model call sees it. `info` is the primary's model facts;
    `mixed`: another provider family wrote part of the history (a fallback did); `warm`:
    the session's newest cache entry still lives (a compaction summary reads it)."""

    root_id: str
    mixed: bool
    anchor: BlockRef | None
    warm: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """A call's answer, the request that got it, and the route it took (None: the
    primary). `detour` and `declared_break` are what the session keeps if a fallback
    answered; `mixed` whether the answer's family differs from the primary's."""

    completion: Completion
    request: Request
    route: Route | None
    detour: Detour | None
    declared_break: str | None
    mixed: bool


def live_for(info: ModelInfo, ttl: Ttl | None) -> float:
    """Seconds an entry of `ttl` lives on the provider of `info` (an implicit cache's
    entries: the model's `idle_ttl`, hours on DeepSeek, for ever on a local server)."""
    menu = lifetimes(info)
    if menu is None or ttl is None:
        return info.idle_ttl if info.idle_ttl is not None else 300.0
    return menu.long if ttl == "1h" else menu.short


def openai_key(agent: SessionAgent, info: ModelInfo, prefix: Prefix, root_id: str) -> str | None:
    """The key for the next request where the model's requests carry one
    (`ModelInfo.cache_key`: OpenAI's `prompt_cache_key`, OpenRouter's `session_id`),
    counted toward the rate its shards follow."""
    if not info.cache_key:
        return None
    agent.key_shards.observe(prefix, agent.clock.now())
    return cache_key(prefix, root_id)


def fleet_used(agent: SessionAgent, site: CallSite, request: Request, started_at: float) -> None:
    """Tell the agent's fleet this call refreshed the shared entry (its tools+system
    marker)."""
    menu = lifetimes(site.info)
    marker = next((b for b in request.breakpoints if b.message is None), None)
    if menu is None or marker is None:
        return
    lives = menu.long if marker.ttl == "1h" else menu.short
    agent.fleet.used(site.prefix, started_at, session_id=site.session_id, live_for=lives)


def with_stripped(declared_break: str | None, stripped: int) -> str | None:
    """A declared break that says when thinking another provider signed was left out."""
    if stripped and declared_break is not None and "thinking" not in declared_break:
        return f"{declared_break}; {stripped} thinking blocks another provider signed left out"
    return declared_break


def tail_policy(policy: CachePolicy, role: str) -> CachePolicy:
    """The policy a session's own tail is written with: forks, reviews and sub-agents end
    soon and never come back to what they add, so they write at the short TTL whatever
    the long-lived sessions use (`child_policy`)."""
    return policy if role in ("main", "branch") else child_policy(policy)


def next_request(
    site: CallSite,
    agent: SessionAgent,
    state: CacheState,
    *,
    stream: bool,
    route: Route | None = None,
) -> tuple[Request, int]:
    """The next request: to the primary, or on `route` of the fallback chain (the same
    tools, system and history, another model; thinking another provider signed is left
    out, see `stoker.agent.fallback`); and how many thinking blocks were left out."""
    prefix = site.prefix if route is None else site.prefix.with_params(model=route.model)
    provider = agent.provider if route is None else route.provider
    info = provider.model_info(prefix.params.model)
    if route is None and not site.mixed:  # the usual case: nothing to leave out
        messages, stripped = site.history, 0
    else:
        messages, stripped = sendable(site.history, to=info.provider, home=site.info.provider)
    policy = tail_policy(agent.cache_policy, site.role)
    previous, long = state.last_write(prefix), state.long_write(prefix)
    ttl = "1h" if previous is not None and previous == long else policy.message_ttl
    p = plan(
        info,
        messages,
        previous=previous,
        policy=policy,
        anchor=site.anchor,
        thinking=prefix.params.thinking_budget is not None,
        held=long,
        stale=state.gone(prefix, agent.clock.now(), live_for(info, ttl)),
        anchored_ttl=anchor_ttl(agent.cache_policy),
    )
    breakpoints = p.breakpoints
    if site.role == "compaction":
        read_at = state.last_write(site.prefix) if site.warm else None
        breakpoints = summary_marks(breakpoints, read_at)
    request = Request(
        prefix=prefix,
        messages=messages,
        max_tokens=agent.max_tokens,
        breakpoints=breakpoints,
        cache_key=openai_key(agent, info, prefix, site.root_id),
        cache_retention=retention(info, agent.cache_policy.keep_warm),
        stream=stream,
        # renders of the primary's messages as sent; a route or a stripped copy renders anew
        render_memo=state.render_memo if route is None and not stripped else {},
    )
    if route is None and not stripped:  # the primary's own history: its explicit cache
        held = explicit.reference(state, prefix, messages, agent.clock.now())
        if held is not None:
            request = replace(request, cache_object=held)
    return request, stripped


async def answered(
    site: CallSite,
    agent: SessionAgent,
    state: CacheState,
    request: Request,
    *,
    route: Route | None,
    detour: Detour | None,
    declared_break: str | None,
    context: CallContext,
) -> Answered:
    """The answer to `request`, from the next entry of the fallback chain while the one
    asked is unavailable."""
    routes = agent.routes
    while True:
        provider = agent.provider if route is None else route.provider
        try:
            completion = await provider.complete(request, context)
        except ProviderError as exc:
            if request.cache_object is not None and exc.status == 404:
                # the explicit cache it named is gone (deleted by another process's sweep,
                # by hand, or expired early): forget it (the fleet too, so no new session
                # names it) and send the whole request again
                log.warning(
                    "session %s: cache %s is gone; sending without it",
                    site.session_id,
                    request.cache_object.name,
                )
                state.explicit = None
                gone = request.cache_object.name
                agent.fleet.uncached(site.prefix, name=gone, at=agent.clock.now())
                request, _ = next_request(site, agent, state, stream=request.stream, route=route)
                continue
            index = detour.index + 1 if detour is not None else 0
            if not transient(exc) or index >= len(routes):
                raise
            route = routes[index]
            reason = why(request.prefix.params.model, exc)
            detour = Detour(index=index, since=agent.clock.now(), reason=reason)
            declared_break = f"{reason}; continuing on {route.spec}"
            log.warning("session %s: %s", site.session_id, declared_break)
            request, stripped = next_request(site, agent, state, stream=request.stream, route=route)
            declared_break = with_stripped(declared_break, stripped)
            continue
        family = provider.model_info(request.prefix.params.model).provider
        mixed = family != site.info.provider
        if mixed:  # its thinking goes back only to its family
            completion = replace(completion, message=replace(completion.message, origin=family))
        return Answered(
            completion=completion,
            request=request,
            route=route,
            detour=detour,
            declared_break=declared_break,
            mixed=mixed,
        )


def measured(
    site: CallSite,
    agent: SessionAgent,
    state: CacheState,
    got: Answered,
    *,
    seq: int,
    declared_break: str | None,
) -> CacheRecord:
    """The record of a finished call, with what the agent's fleet learns from it."""
    request, completion, route = got.request, got.completion, got.route
    provider = agent.provider if route is None else route.provider
    info = provider.model_info(request.prefix.params.model)
    if route is None:  # a fallback's calls are no part of the agent's fleet
        first = state.last_started is None and site.role == "main" and site.parent_id is None
        if first:
            agent.fleet.arrived(site.prefix, completion.started_at)
        fleet_used(agent, site, request, completion.started_at)
    record = build_record(
        session_id=site.session_id,
        seq=seq,
        role=site.role,
        provider=provider.name,
        info=info,
        request=request,
        previous=state.last_request,
        previous_started_at=state.last_started,
        previous_written=state.last_written,
        previous_cached=state.last_cached,
        started_at=completion.started_at,
        usage=completion.usage,
        history=state.chain[-1] if state.chain else EMPTY_CHAIN,
        new_from=state.recorded_upto,
        retries=completion.retries,
        facts=completion.facts,
        declared_break=declared_break,
        ttl_seconds=live_for(site.info, state.live_ttl),
        stripped=drops_thinking(request.messages, request.prefix, info),
    )
    record = after_stripping(record, request.messages, request.prefix, info)
    record = as_reported(record, completion)
    if request.cache_object is not None and state.explicit is not None:
        record = replace(record, cache_read=min(record.usage.read, state.explicit.tokens))
    if route is not None:
        record = replace(record, fallback_of=site.prefix.params.model)
    if (gap := state.take_gap()) is not None:
        record = replace(record, idle_before=gap)
    return record


def as_reported(record: CacheRecord, completion: Completion) -> CacheRecord:
    """The record with what the provider itself reported: its cost (OpenRouter's
    `usage.cost` wins over the price table's arithmetic), and the prefill a local server's
    cache saved (its cost is time: said beside the explanation)."""
    if completion.cost_usd is not None:
        record = replace(record, cost_usd=completion.cost_usd)
    notes = [detail for cause, detail in completion.facts if cause == "prefill"]
    if notes:
        detail = "; ".join([record.explanation.detail, *notes]).strip("; ")
        record = replace(record, explanation=replace(record.explanation, detail=detail))
    return record


def drops_thinking(messages: Sequence[Message], prefix: Prefix, info: ModelInfo) -> bool:
    """Whether the model drops thinking from `messages` that the previous call sent (a new
    turn after thinking, on a model that strips earlier thinking)."""
    if prefix.params.thinking_budget is None or not info.strips_thinking:
        return False
    return stripped_from(messages) is not None


def after_stripping(
    record: CacheRecord, messages: Sequence[Message], prefix: Prefix, info: ModelInfo
) -> CacheRecord:
    """Say so when the model dropped earlier thinking: the history after it reads as new
    to the provider, whatever Stoker does (a cost of the model, not a miss)."""
    cut = stripped_from(messages) if drops_thinking(messages, prefix, info) else None
    if cut is None:
        return record
    note = (
        f"; {prefix.params.model} drops earlier thinking at a new turn, so the history "
        f"after messages[{cut[0]}] was written again"
    )
    detail = record.explanation.detail + note
    return replace(record, explanation=replace(record.explanation, detail=detail))
