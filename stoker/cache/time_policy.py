"""How a session crosses an idle gap: let the cache expire, ping it, or seal it.

A cache entry lives for its TTL from the start of the last request that wrote or read
it. When the user is away longer than that, the next turn rewrites the whole prefix at
write prices. Two requests can prevent it, each sent just before the entry expires:

- a *ping* reads the prefix (refreshing it for another short TTL) and writes the tail
  the last call left unwritten, at short-TTL prices;
- a *seal* reads the prefix and writes that tail under a single long-TTL breakpoint: one
  long entry now covers the whole prefix, so it survives the long TTL (an hour on
  Anthropic) for the price of one read plus a long write of the tail only.

Which one, if any, is arithmetic over the model's prices and when this user comes back
(`stoker.cache.learned`): `decide` picks the move with the least expected cost under the
gaps seen (this session's, the store's other sessions', whatever the caller adds, e.g.
the user's), counted from the time already idle; with too few of them, a rent-or-buy
rule keeps the entry while the gap's spend stays within the rewrite it saves, which
never costs more than twice what perfect foresight pays (`stoker.cache.foresight`).
The user's settings win over both: keep-warm off, the cap of one rewrite per gap
(`gap_cap`), and the session's money cap.

Units are base-input tokens (a token billed at the model's plain input price), so the
arithmetic holds whether or not the model has a price in the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from stoker.cache import learned
from stoker.cache.foresight import Gap, Point, tariff
from stoker.cache.models import ModelInfo
from stoker.wire.request import Ttl

Action = Literal["ping", "seal", "expire", "cache_create", "cache_extend", "cache_delete"]

LONGEST_TTL = 12 * 3600.0
"""The longest entry lifetime of any provider here (OpenAI's 12 hours): an entry last used
longer ago than this is gone, whatever it was."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimePolicy:
    """A session's rules for idle gaps. `enabled=False` lets every entry expire.

    `margin`: seconds before expiry a keep-warm request starts (it must start, not end,
    before the entry expires). `gap_cap`: the most one idle gap may spend on keeping
    warm, in rewrites of the prefix (1.0: never more than the rewrite it tries to save).
    `session_cap_usd`: the most a session spends on keep-warm in all. `horizon`: a gap
    longer than this counts as a user who did not come back. `prior_weight`: how many
    observed gaps the optimistic prior ("the user comes back") is worth. `fleet`: weigh
    the new sessions of the same agent too: their tools and system prompt are kept warm
    by their arrivals (or for them, see `decide_shared`), so a session's own keep-warm is
    worth only what it adds past that shared part. `implicit_trust`: how much of what an
    implicit cache would save is counted on (1.0: a read within the model table's
    `idle_ttl` hits; 0.0: only guaranteed discounts count, as Google guarantees none for
    its implicit cache, so only explicit cache objects keep a prefix, see
    `stoker.cache.storage`).
    """

    enabled: bool = True
    margin: float = 30.0
    gap_cap: float = 1.0
    session_cap_usd: float | None = None
    horizon: float = 24 * 3600.0
    prior_weight: float = 1.0
    fleet: bool = True
    implicit_trust: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Lifetimes:
    """The two TTLs a provider offers and what writing under each costs (x base input)."""

    short: float  # seconds
    long: float
    write_short: float
    write_long: float
    read: float


TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
"""What each TTL a marker may name (`ModelInfo.ttls`) lasts."""


def lifetimes(info: ModelInfo) -> Lifetimes | None:
    """The TTL menu of `info`'s model (`ModelInfo.ttls`), where Stoker sends keep-warm
    requests: where a request chooses its entries' TTLs with markers (Claude, on the
    Claude API, Bedrock and OpenRouter). A model with one TTL has no long lifetime: its
    long entry is its short one, at the short price.

    None for the others. OpenAI's older models cache implicitly with free writes (what a
    request can ask for is `prompt_cache_retention`, see `retention`); on GPT-5.6+ an
    explicit breakpoint may not sit on an assistant's output, so a seal has no position
    of its own to write a 12-hour entry at, and a pre-warm ping is left for later work.
    Implicit caches (DeepSeek's, a local server's) keep entries by their own rules, except
    where a read renews an entry (Gemini's, `ModelInfo.warm_by_read`): a ping keeps it
    for `idle_ttl` more, and there is no longer lifetime to seal under.
    """
    if info.warm_by_read and info.idle_ttl:
        # An implicit entry a read renews (Gemini): one lifetime, writes at the input price.
        idle = info.idle_ttl
        return Lifetimes(
            short=idle,
            long=idle,
            write_short=info.write_5m,
            write_long=info.write_5m,
            read=info.read,
        )
    if not info.ttls:
        return None
    short, long = TTL_SECONDS[info.ttls[0]], TTL_SECONDS[info.ttls[-1]]
    return Lifetimes(
        short=short,
        long=long,
        write_short=info.write_5m,
        write_long=info.write_1h if long > short else info.write_5m,
        read=info.read,
    )


def retention(info: ModelInfo, policy: TimePolicy) -> str | None:
    """`prompt_cache_retention` for a request: "24h" where the model accepts it and the
    policy keeps caches across gaps (it costs nothing extra; without it an organisation
    under zero data retention gets in-memory entries, gone after a few idle minutes)."""
    return "24h" if policy.enabled and info.retention_24h else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Idle:
    """What a session has cached, and since when: the input of a decision."""

    refreshed_at: float  # start of the last request that wrote or read the live entry
    live_for: float  # seconds that entry lives from `refreshed_at`
    idle_since: float  # start of the last turn's last call: the gap began there
    cached: int  # tokens the live entry covers
    shared: int = 0  # of those, tokens kept warm for the agent's new sessions anyway
    tail: int  # tokens after it that a keep-warm would write (an estimate)
    long_lived: bool = False  # the live entry is already a long-TTL one (a seal's)
    overhead: int = 16  # the keep-warm's own placeholder message, never cached
    spent: float = 0.0  # keep-warm already spent in this gap, base-input tokens
    spent_usd: float = 0.0  # keep-warm spent by the session in all
    slack: float = 0.0  # twice foresight's cost of the session's finished gaps, less what
    # the policy paid across them: what a learned move's worst case may use up
    # (`stoker.cache.robust`; 0: each gap on its own within twice foresight)


@dataclass(frozen=True, slots=True, kw_only=True)
class WarmPlan:
    """What to do before the entry expires, when, and why (costs in base-input tokens)."""

    action: Action
    at: float  # when to send it; for "expire", when the entry expires
    ttl: Ttl  # "5m"-bucket (short) or "1h"-bucket (long) write
    covers_until: float  # when the entry would expire after the action
    cost: float
    saves: float
    chance: float  # estimated chance the user is back while the entry lives
    reason: str
    scope: Literal["session", "shared"] = "session"  # the session's history, or only the
    # tools and system prompt its agent's new sessions share (see `decide_shared`)

    @property
    def sends(self) -> bool:
        return self.action != "expire"


def ending(action: Action, *, at: float, ttl: Ttl, reason: str) -> WarmPlan:
    """A plan that spends and saves nothing: the entry ends at `at` (expires, is deleted)."""
    return WarmPlan(
        action=action,
        at=at,
        ttl=ttl,
        covers_until=at,
        cost=0.0,
        saves=0.0,
        chance=0.0,
        reason=reason,
    )


def return_chance(
    gaps: Sequence[float], *, elapsed: float, within: float, horizon: float, weight: float
) -> float:
    """P(the user is back within `within` more seconds | idle for `elapsed` already).

    `gaps` are observed idle gaps in seconds (`inf` for a user who never came back, or
    anything past `horizon`). Only gaps longer than `elapsed` say something. The prior,
    worth `weight` of them, treats time away as scale-free (the longer someone has been
    away, the longer they are likely to stay): back within h after e idle is h / (e + h).
    """
    prior = within / (elapsed + within)
    longer = [g for g in gaps if g > elapsed]
    back = sum(1 for g in longer if g <= min(elapsed + within, horizon))
    return (back + weight * prior) / (len(longer) + weight)


def decide(
    idle: Idle,
    info: ModelInfo,
    policy: TimePolicy,
    *,
    gaps: Sequence[float] = (),
    price: float | None = None,
) -> WarmPlan:
    """The cheapest way across the gap that started at `idle.idle_since`: the learned
    (or rent-or-buy) move at the next refresh point, within the policy's caps; its
    reason says what it expected (the chance of a return in time, the cost either way).

    `price` is USD per base-input token, for the session's money cap (None: unknown).
    """
    expires = idle.refreshed_at + idle.live_for
    menu = lifetimes(info)

    def expire(reason: str) -> WarmPlan:
        return ending("expire", at=expires, ttl="5m", reason=reason)

    if not policy.enabled:
        return expire("keep-warm is off")
    if menu is None:
        return expire(
            f"keep-warm requests go to models whose requests choose their cache TTLs; "
            f"{info.name}'s entries live by its provider's rules"
        )
    if idle.cached < info.min_cacheable:
        return expire(f"nothing cached: the prefix is under {info.min_cacheable} tokens")
    at = expires - policy.margin
    own = idle.cached - min(idle.shared, idle.cached)  # what only this session would lose
    scale = own / idle.cached if idle.cached else 0.0
    if info.warm_by_read:  # an implicit entry saves only what the policy counts on
        scale *= policy.implicit_trust
    gap = Gap(
        seconds=math.inf,  # unknown: the decision is online
        cached=idle.cached,
        tail=idle.tail,
        long_lived=idle.long_lived,
        overhead=idle.overhead,
    )
    point = Point(
        at=at - idle.idle_since,
        expires=expires - idle.idle_since,
        long_lived=idle.long_lived,
        tail_written=False,
        spent=idle.spent,
    )
    menu_ = tariff(info, margin=policy.margin)
    if idle.tail <= 0 and not idle.long_lived:
        # A seal needs a position of its own to write the long entry at: the unwritten
        # tail, or the long entry it refreshes. A short entry read again stays short.
        menu_ = replace(menu_, long=menu_.short, write_long=menu_.write_short)
    choice = learned.choose(
        gap, menu_, point, gaps, horizon=policy.horizon, scale=scale, slack=idle.slack
    )
    if choice.move not in ("ping", "seal"):
        return expire(_why(choice, idle, menu.long if idle.long_lived else menu.short))
    # A long entry read again is re-sealed under its 1-hour markers (a 5-minute marker
    # would let the tail it covers expire sooner).
    action: Action = "seal" if choice.move == "seal" or idle.long_lived else "ping"
    life = menu.long if action == "seal" else menu.short
    cost = choice.cost
    cap = policy.gap_cap * menu.write_short * (idle.cached + idle.tail)
    if idle.spent + cost > cap:
        return expire(
            f"this gap already spent {idle.spent:,.0f} of its {cap:,.0f} keep-warm cap "
            "(one rewrite): letting it expire"
        )
    if (
        policy.session_cap_usd is not None
        and price is not None
        and idle.spent_usd + cost * price > policy.session_cap_usd
    ):
        return expire(f"the session's keep-warm cap of ${policy.session_cap_usd} is reached")
    return WarmPlan(
        action=action,
        at=at,
        ttl="1h" if action == "seal" else "5m",
        covers_until=at + life,
        cost=cost,
        saves=cost + max(choice.expire - choice.keep, 0.0),
        chance=choice.chance,
        reason=f"{action}: keeps {idle.cached:,} tokens warm for {life / 60:.0f} min; "
        + _why(choice, idle, life),
    )


def _why(choice: learned.Choice, idle: Idle, life: float) -> str:
    """What the decision expected: the chance of a return in time and the cost either
    way (expected, from the gaps seen; or rent-or-buy's bound)."""
    if choice.basis == "guarded":
        return (
            f"{choice.instead} was cheaper in expectation, but a return just after it could "
            f"cost more than twice what foresight pays, past the session's slack of "
            f"{idle.slack:,.0f}; the cheapest move within it: "
        ) + _why(replace(choice, basis="learned"), idle, life)
    if choice.basis == "rent-or-buy":
        if choice.move == "expire":
            return (
                f"rent-or-buy (too few gaps seen to estimate returns): this gap spent "
                f"{idle.spent:,.0f}, and another {choice.keep:,.0f} would pass the "
                f"{choice.expire:,.0f} rewrite it saves (its cap: one rewrite), so it expires"
            )
        return (
            f"rent-or-buy (too few gaps seen to estimate returns): {choice.cost:,.0f} now, "
            f"the gap's spend kept within the {choice.expire:,.0f} rewrite it saves (at "
            "most twice what foresight pays)"
        )
    if math.isinf(choice.keep):
        return (
            f"this gap spent {idle.spent:,.0f}: any more keep-warm would pass the rewrite it "
            "saves (its cap: one rewrite), so it expires"
        )
    expected = (
        f"expected cost {choice.keep:,.0f} keeping it warm, {choice.expire:,.0f} letting it "
        f"expire (chance of a return within {life / 60:.0f} min {choice.chance:.0%}, from "
        f"{choice.seen} gaps seen)"
    )
    if choice.move == "expire":
        return expected + ": cheaper to rewrite if the user comes back"
    return expected


def decide_shared(
    fleet: Idle,
    info: ModelInfo,
    policy: TimePolicy,
    *,
    arrivals: Sequence[float],
    price: float | None = None,
) -> WarmPlan:
    """Whether to keep only the shared part (tools + system) warm for the next new session
    of the agent: `decide` over the fleet, where `fleet.idle_since` is the last arrival of
    a new session, `fleet.cached` the shared tokens, and the chance of a return the chance
    that another session arrives while the entry lives, from the gaps between `arrivals`.
    The same caps hold: one gap between arrivals spends at most one rewrite of the part."""
    plan = decide(fleet, info, policy, gaps=arrivals, price=price)
    if not plan.sends:
        return replace(plan, scope="shared")
    reason = plan.reason.replace("chance of a return", "chance a new session arrives").replace(
        "too few gaps seen to estimate returns",
        "too few arrivals seen to tell when a new session arrives",
    )
    return replace(plan, scope="shared", reason="shared tools+system " + reason)
