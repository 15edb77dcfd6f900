"""A session's explicit cache objects (Gemini's `cachedContents`) as values: whether the
next request may start from the one it holds, what the time policy plans for it
(`stoker.cache.storage`), the lifecycle call that carries a plan out, and its record.

A cache holds the session's prefix and its history as sent when it was made; a request
names it while it lives (a margin before its expiry) and the history still starts with
what it holds, and then sends only the messages after those. Each create, extend and
delete is one record (purpose "cache_create", "cache_extend", "cache_delete") with the
storage it bought or gave back (`CacheRecord.storage_token_hours`) and its cost, so
reports show storage spend beside reads and writes. Only the session that made a cache
extends or deletes it (its forks may read it); its agent deletes what its sessions still
hold when it closes (`Holders`), and `Agent.sweep_caches` what a process left behind.

A new conversation whose model has explicit caches and whose implicit cache is not fully
trusted caches its tools and system prompt before its first call (`head`), so that call
and every later one read them and no cache ever bills again what a call had billed. That
cache is its agent's fleet's too (`stoker.cache.fleet_cache`): a new session that finds a
live one reads it instead of making another, and extends it while the fleet's arrivals
pay for its storage; its maker keeps it through its own gaps while they do.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from stoker.agent.seams import SessionAgent
from stoker.agent.state import CacheState
from stoker.agent.telemetry import CallFacts
from stoker.cache.fleet import SharedCache, shared_tokens
from stoker.cache.fleet_cache import decide_extension, fleet_keeps
from stoker.cache.models import ModelInfo
from stoker.cache.pricing import cost_usd
from stoker.cache.record import notify
from stoker.cache.storage import Stored, decide_head, decide_storage, storage_rate
from stoker.cache.time_policy import Idle, WarmPlan
from stoker.providers.caches import CacheCall, cache_objects, label
from stoker.wire.fingerprint import EMPTY_CHAIN, fingerprints, key_of
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.prefix import Prefix
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import CacheObject, Request
from stoker.wire.usage import Usage

log = logging.getLogger(__name__)

LIFECYCLE = frozenset({"cache_create", "cache_extend", "cache_delete"})
SAFETY = 30.0
"""Seconds before its expiry a cache is no longer named: a request must reach the API
while the cache is still there."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    """A session as its cache's lifecycle calls see it. The views its time policy and its
    model calls take (`warmth.GapView`, `calls.CallSite`) are this and what they add."""

    session_id: str
    parent_id: str | None
    role: str
    prefix: Prefix
    history: tuple[Message, ...]
    info: ModelInfo


def _chain_at(state: CacheState, messages: int) -> str:
    return state.chain[messages - 1] if 0 < messages <= len(state.chain) else EMPTY_CHAIN


def covers(held: Stored, state: CacheState, prefix: Prefix, count: int) -> bool:
    """Whether a history of `count` messages (this prefix) still starts with what the
    cache holds: nothing was compacted, rebased or branched away under it."""
    return (
        held.prefix_key == key_of(prefix)
        and held.messages <= count
        and _chain_at(state, held.messages) == held.chain
    )


def reference(
    state: CacheState, prefix: Prefix, messages: Sequence[Message], now: float
) -> CacheObject | None:
    """The cache the next request starts from, if the session holds a live one that the
    request's history starts with."""
    held = state.explicit
    if held is None or held.expires_at - now <= SAFETY:
        return None
    if not covers(held, state, prefix, len(messages)):
        return None
    return CacheObject(name=held.name, messages=held.messages)


def calls_per_turn(history: Sequence[Message]) -> float:
    """Provider calls per user turn so far (assistant messages per user prompt)."""
    prompts = sum(1 for m in history if isinstance(m, UserMessage) and m.text)
    answers = sum(1 for m in history if isinstance(m, AssistantMessage))
    return answers / prompts if prompts else 1.0


def _delete(now: float, why: str) -> WarmPlan:
    return WarmPlan(
        action="cache_delete",
        at=now,
        ttl="1h",
        covers_until=now,
        cost=0.0,
        saves=0.0,
        chance=0.0,
        reason=why,
    )


def stale(owner: Owner, state: CacheState, agent: SessionAgent) -> WarmPlan | None:
    """A plan to delete the cache the session holds when its history no longer starts
    with what the cache holds (a rebase, a compaction); None otherwise."""
    held = state.explicit
    now = agent.clock.now()
    if held is None or held.owner != owner.session_id or held.expires_at <= now:
        return None
    if covers(held, state, owner.prefix, len(owner.history)):
        return None
    return _delete(now, "the history no longer starts with what it holds")


def plan(
    owner: Owner,
    *,
    state: CacheState,
    agent: SessionAgent,
    idle: Idle,
    gaps: Sequence[float],
) -> tuple[float, WarmPlan | None]:
    """The time policy's storage decision for this gap, and its net value; (0, None) where
    the model or provider has no explicit caches. A held cache the history no longer
    starts with is deleted now; a new cache replaces a held one only once that is gone."""
    if storage_rate(owner.info) is None or cache_objects(agent.provider) is None:
        return 0.0, None
    gone = stale(owner, state, agent)
    if gone is not None:
        return 0.0, gone
    now = agent.clock.now()
    _synced(owner.prefix, state, agent)
    held = state.explicit
    if held is not None and (held.owner != owner.session_id or held.expires_at <= now):
        held = None  # a parent's (not this session's to keep), or gone by itself
    net, found = decide_storage(
        idle,
        owner.info,
        agent.cache_policy.keep_warm,
        now=now,
        held=held,
        calls_per_turn=calls_per_turn(owner.history),
        gaps=gaps,
    )
    if _fleets(held, owner, agent) and found is not None and found.action != "cache_create":
        return 0.0, None  # the fleet's arrivals pay for it: not this session's to end
    if found is not None and found.action == "cache_create" and held is not None:
        # a larger cache replaces this one: delete it first, then plan again
        reason = "replaced by one that holds the history since: " + found.reason
        return net, replace(found, action="cache_delete", at=now, covers_until=now, reason=reason)
    return net, found


def _synced(prefix: Prefix, state: CacheState, agent: SessionAgent) -> None:
    """The session's cache with the expiry its fleet knows, when another session of the
    fleet extended it since."""
    held = state.explicit
    if held is None or held.messages:
        return
    shared = _shared(prefix, agent, margin=0.0)
    if shared is not None and shared.name == held.name and shared.expires_at > held.expires_at:
        state.explicit = replace(held, expires_at=shared.expires_at)


def _fleets(held: Stored | None, owner: Owner, agent: SessionAgent) -> bool:
    """Whether `held` is the fleet's cache of the tools and system and the fleet's arrivals
    pay for keeping it (`fleet_keeps`)."""
    if held is None or held.messages:
        return False
    shared = _shared(owner.prefix, agent, margin=0.0)
    if shared is None or shared.name != held.name:
        return False
    fleet = agent.fleet.get(owner.prefix)
    gaps = fleet.gaps() if fleet is not None else []
    return fleet_keeps(owner.info, agent.cache_policy.keep_warm, gaps)


def _account(agent: SessionAgent) -> str | None:
    """The account the agent's explicit caches live in (`cache_account`: a digest of the
    API key and server), or None where the provider names none: then nothing is shared."""
    account = getattr(cache_objects(agent.provider), "cache_account", None)
    return account if isinstance(account, str) and account else None


def _shared(prefix: Prefix, agent: SessionAgent, *, margin: float) -> SharedCache | None:
    account = _account(agent)
    if account is None:
        return None
    return agent.fleet.shared_cache(prefix, account=account, now=agent.clock.now(), margin=margin)


def _published(owner: Owner, agent: SessionAgent, action: str, held: Stored | None) -> None:
    """Tell the fleet what became of a cache of the tools and system alone."""
    account = _account(agent)
    if held is None or held.messages or account is None:
        return
    now = agent.clock.now()
    if action == "cache_delete":
        agent.fleet.uncached(owner.prefix, name=held.name, at=now)
        return
    shared = SharedCache(
        name=held.name,
        model=owner.prefix.params.model,
        account=account,
        tokens=held.tokens,
        expires_at=held.expires_at,
        noted_at=now,
    )
    agent.fleet.cached(owner.prefix, shared)


def _record(
    owner: Owner,
    plan_: WarmPlan,
    agent: SessionAgent,
    request: Request,
    call: CacheCall,
    *,
    chain: str,
    usage: Usage,
    token_hours: float,
    seq: int,
) -> CacheRecord:
    """The record of a lifecycle call, explained by its plan."""
    info = owner.info
    cost = cost_usd(usage, info)
    if cost is not None and info.storage is not None:
        cost += token_hours * info.storage / 1_000_000
    return CacheRecord(
        session_id=owner.session_id,
        seq=seq,
        role=owner.role,
        provider=agent.provider.name,
        model=request.prefix.params.model,
        started_at=call.started_at,
        fingerprints=fingerprints(request, history=chain, new_from=len(request.messages)),
        breakpoints=(),
        usage=usage,
        cost_usd=cost,
        retries=call.retries,
        explanation=Explanation(verdict="kept_warm", detail=f"{plan_.action}: {plan_.reason}"),
        purpose=plan_.action,
        storage_token_hours=token_hours,
    )


async def carry_out(
    plan_: WarmPlan,
    owner: Owner,
    *,
    state: CacheState,
    agent: SessionAgent,
    seq: int,
    facts: Callable[[str, Request], CallFacts],
    gap: bool = True,
    history: Sequence[Message] | None = None,
    fleet: bool = False,
) -> CacheRecord | None:
    """Make the lifecycle call `plan_` names; its record (`state` told what the session
    now holds), or None when it failed (logged; the gap is marked, as a failed keep-warm).
    `gap=False`: not an idle gap's (`head`): its cost is no keep-warm spend, and a failure
    marks nothing. `history` replaces the owner's (`head` caches the tools and system
    alone). `fleet`: the held cache is the fleet's, which this session may extend though
    another made it. What becomes of a cache of the tools and system alone is told to the
    fleet."""
    session_id, prefix, info = owner.session_id, owner.prefix, owner.info
    history = owner.history if history is None else history
    caches = cache_objects(agent.provider)
    if caches is None:
        return None
    now = agent.clock.now()
    _synced(prefix, state, agent)  # another session of the fleet may have extended it
    held = state.explicit
    if held is not None and held.owner != session_id and not fleet:
        held = None  # a parent's: read, never extended or deleted here
    creating = plan_.action == "cache_create"
    covered = held.messages if held is not None and not creating else len(history)
    request = Request(prefix=prefix, messages=tuple(history[:covered]), max_tokens=1)
    chain = _chain_at(state, covered)
    with agent.telemetry.call(facts(plan_.action, request)) as span:
        try:
            if creating:
                ttl = plan_.covers_until - now
                call = await caches.create_cache(
                    request, ttl=ttl, label=label(agent.name, session_id)
                )
                usage = Usage(written_1h=call.tokens)
                hours = call.tokens * (call.expires_at - call.started_at) / 3600.0
                state.explicit = Stored(
                    name=call.name,
                    tokens=call.tokens,
                    messages=covered,
                    prefix_key=key_of(prefix),
                    chain=chain,
                    created_at=call.started_at,
                    expires_at=call.expires_at,
                    owner=session_id,
                )
            elif held is not None and plan_.action == "cache_extend":
                call = await caches.extend_cache(held.name, ttl=plan_.covers_until - now)
                usage = Usage()
                hours = held.tokens * (call.expires_at - held.expires_at) / 3600.0
                state.explicit = replace(held, expires_at=call.expires_at)
            elif held is not None:
                call = await caches.delete_cache(held.name)
                usage = Usage()
                hours = -held.tokens * max(0.0, held.expires_at - call.started_at) / 3600.0
                state.explicit = None
            else:
                return None
            _published(owner, agent, plan_.action, state.explicit or held)
        except Exception as exc:  # a lifecycle call must never hurt the session
            log.warning("%s of session %s failed: %r", plan_.action, session_id, exc)
            span.failed(exc)
            if gap:
                state.warm_failed_at = now
            return None
        record = _record(
            owner, plan_, agent, request, call, chain=chain, usage=usage, token_hours=hours, seq=seq
        )
        span.recorded(record)
    if gap:
        rate = storage_rate(info) or 0.0
        state.warm_spent += usage.written * info.write_1h + max(hours, 0.0) * rate
        state.warm_spent_usd += record.cost_usd or 0.0
    return record


def for_gap(plan_: WarmPlan | None, started_at: float) -> WarmPlan | None:
    """The plan of a gap as the first call after it is explained by (`warmth.after_gap`):
    a step of the session's explicit cache not due when the call started was not missed;
    the time policy let the implicit entry go while the cache carries what it holds."""
    if plan_ is None or plan_.action not in LIFECYCLE or plan_.at <= started_at:
        return plan_
    why = f"the session's explicit cache carries what it holds (next, {plan_.reason})"
    return replace(plan_, action="expire", reason=why)


async def head(
    site: Owner,
    agent: SessionAgent,
    state: CacheState,
    records: Sequence[CacheRecord],
    facts: Callable[[str, Request], CallFacts],
) -> CacheRecord | None:
    """Before a new conversation's first call (a main session's that nothing answered
    yet), cache its tools and system prompt alone when the time policy says so
    (`stoker.cache.storage.decide_head`), so that call and every later one, its forks'
    too, start from the cache (`reference`); the creation's record (`records` are the
    session's, the new one's `seq` follows them), or None. Forks, reviews and sub-agents
    read their parent's cache while it lives and make none; a resumed conversation's
    history was billed already, and its gaps decide for it."""
    if site.role != "main" or site.parent_id is not None or state.last_started is not None:
        return None
    answered = any(isinstance(m, AssistantMessage) for m in site.history)
    if answered or state.explicit is not None or cache_objects(agent.provider) is None:
        return None
    tokens = shared_tokens(site.prefix)
    now = agent.clock.now()
    found = decide_head(site.info, agent.cache_policy.keep_warm, tokens=tokens, now=now)
    if found is None:
        return None
    shared = _shared(site.prefix, agent, margin=SAFETY)
    if shared is not None:
        return await _adopt(shared, site, agent, state, records, facts)
    record = await carry_out(
        found,
        site,
        state=state,
        agent=agent,
        seq=len(records),
        facts=facts,
        gap=False,
        history=(),
    )
    if record is not None:
        notify(record)
    return record


async def _adopt(
    shared: SharedCache,
    site: Owner,
    agent: SessionAgent,
    state: CacheState,
    records: Sequence[CacheRecord],
    facts: Callable[[str, Request], CallFacts],
) -> CacheRecord | None:
    """Read the fleet's cache of the tools and system instead of making one, and extend it
    when the fleet's arrivals pay for that (`decide_extension`); the extension's record,
    or None."""
    state.explicit = Stored(
        name=shared.name,
        tokens=shared.tokens,
        messages=0,
        prefix_key=key_of(site.prefix),
        chain=EMPTY_CHAIN,
        created_at=shared.noted_at,
        expires_at=shared.expires_at,
        owner="fleet",
    )
    fleet = agent.fleet.get(site.prefix)
    gaps = fleet.gaps() if fleet is not None else []
    now = agent.clock.now()
    found = decide_extension(site.info, agent.cache_policy.keep_warm, shared, now=now, gaps=gaps)
    if found is None:
        return None
    record = await carry_out(
        found, site, state=state, agent=agent, seq=len(records), facts=facts, gap=False, fleet=True
    )
    if record is not None:
        notify(record)
    return record


async def release(
    owner: Owner,
    *,
    state: CacheState,
    agent: SessionAgent,
    seq: int,
    facts: Callable[[str, Request], CallFacts],
) -> CacheRecord | None:
    """Delete the cache the session made, if it still lives (its agent closes); the
    record, or None."""
    _synced(owner.prefix, state, agent)  # another session of the fleet may have extended it
    held = state.explicit
    now = agent.clock.now()
    if held is None or held.owner != owner.session_id or held.expires_at <= now:
        return None
    return await carry_out(
        _delete(now, "its agent closed"),
        owner,
        state=state,
        agent=agent,
        seq=seq,
        facts=facts,
    )


class Releases(Protocol):
    """A session that can delete the cache it holds (`Session.release_caches`)."""

    @property
    def id(self) -> str: ...

    async def release_caches(self) -> CacheRecord | None: ...


@dataclass(slots=True)
class Holders:
    """An agent's sessions, held weakly, whose explicit caches its `aclose` deletes."""

    _sessions: weakref.WeakValueDictionary[str, Releases] = field(
        default_factory=weakref.WeakValueDictionary
    )

    def track(self, session: Releases) -> None:
        self._sessions[session.id] = session

    async def release_all(self) -> list[CacheRecord]:
        """Delete every cache a tracked session still holds; their records."""
        records = []
        for session in list(self._sessions.values()):
            try:
                record = await session.release_caches()
            except Exception as exc:  # closing must go on for the others
                log.warning("deleting the caches of session %s failed: %r", session.id, exc)
                continue
            if record is not None:
                records.append(record)
        return records
