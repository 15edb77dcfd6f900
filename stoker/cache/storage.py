"""Explicit cache objects across idle time: create one, extend the one held, or delete it.

The time policy's third kind of decision, for caches that are resources billed for
storage while they exist (Gemini's `cachedContents`: `ModelInfo.storage`, USD per
million token-hours). In base-input tokens (one token at the model's plain input price),
for a cache of `C` tokens:

* creating it costs `w_c * C` (`ModelInfo.write_1h`; Gemini bills creation as input);
* holding it costs `s * C` per hour, `s = storage / input` (3.3 on Gemini 2.5 Flash);
* each read it serves saves `w - r` per token against the rewrite it spares (`write_5m`,
  an implicit write at the input price, minus the read price `read`).

A cache is worth what the user's return is expected to read from it: with `P(t)` the
chance the user is back within `t` (`time_policy.return_chance`, from the session's
gaps), `n` the reads the return makes that nothing else discounts, and `H(a, b)` the
expected hours the cache is held in the window `[a, b]` (it is deleted once its read is
done, and storage is billed for the time it existed):

    create(L) = P(s0..s0+L) * n * (w - r) * C  -  w_c * C  -  s * C * H(s0, s0+L)
    extend(D) = P(s0..D) * n * (w - r) * C_h  -  s * C_h * H(0, D)
    keep      = P(s0..rem) * n * (w - r) * C_h  -  s * C_h * H(0, rem)
    delete    = 0 (the rest of the storage is refunded)

`s0` is when the implicit entry would expire (the cache serves only returns after it)
when the policy counts on the implicit cache (`TimePolicy.implicit_trust`); when it does
not, `s0` is now, and every call of the returning turn counts as a read the cache alone
discounts: `n = 1 + (1 - trust) * (calls per turn - 1)`. The best option wins; a held
cache nothing is worth keeping for is deleted at once. At Gemini's prices, storage (3.3
to 3.6 per token-hour) costs more than keeping an implicit entry warm with reads (0.1
every `idle_ttl`), so when the implicit cache is trusted explicit caches rarely win.

A new session's first call is the one case decided before any gap (`decide_head`): when
the implicit cache is not fully trusted, the tools and system prompt are cached alone
before that call, so the creation bills once what the call would have written anyway,
and every call after, a fork's too, reads them. A cache made later holds tokens already
billed once, and creating it bills them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stoker.cache.models import ModelInfo
from stoker.cache.time_policy import Idle, TimePolicy, WarmPlan, return_chance

TTLS = (300.0, 900.0, 1800.0, 3600.0, 7200.0, 3 * 3600.0, 6 * 3600.0, 12 * 3600.0, 86400.0)
"""The lifetimes a new cache or an extension may ask for (seconds)."""
HEAD_TTL = 3600.0
"""The lifetime of a cache made before a session's first call (the API's default): it
must outlive the turn, which cannot extend it; the gaps after decide whether to keep,
extend or delete it (a deletion gives the storage not used back)."""
_STEPS = 24  # points of the integral of H
NEAR_BEST = 0.9
"""A lifetime is the shortest whose value is this close to the best one's: a cache is
committed for as little as possible and extended when still worth it, so a process that
dies holding one leaves little storage running."""


def _shortest(options: list[tuple[float, WarmPlan]]) -> tuple[float, WarmPlan | None]:
    """Of options in order of lifetime, the shortest within `NEAR_BEST` of the best."""
    good = [o for o in options if o[0] > 0]
    if not good:
        return 0.0, None
    top = max(value for value, _ in good)
    return next(o for o in good if o[0] >= NEAR_BEST * top)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    """An explicit cache a session holds: its name and size, the prefix (`prefix_key`,
    `stoker.wire.fingerprint.key_of`) and first `messages` messages it holds (`chain`,
    the history's hash chain there), and when it was made and expires. Only its `owner`
    session extends or deletes it; its forks may read it."""

    name: str
    tokens: int
    messages: int
    prefix_key: str
    chain: str
    created_at: float
    expires_at: float
    owner: str


def storage_rate(info: ModelInfo) -> float | None:
    """Storage in base-input tokens per token-hour; None where the model has no explicit
    caches or no price to weigh them by."""
    if info.storage is None or not info.input:
        return None
    return info.storage / info.input


@dataclass(frozen=True, slots=True, kw_only=True)
class _Returns:
    """The chance of a return and the expected holding time, from now."""

    gaps: Sequence[float]
    elapsed: float
    policy: TimePolicy

    def chance(self, within: float) -> float:
        if within <= 0:
            return 0.0
        p = self.policy
        return return_chance(
            self.gaps,
            # a gap is at least the margin old when anything is sent in it (the prior
            # would have the user back at once, at no cost of storage, at zero)
            elapsed=max(self.elapsed, p.margin),
            within=within,
            horizon=p.horizon,
            weight=p.prior_weight,
        )

    def between(self, start: float, end: float) -> float:
        return max(0.0, self.chance(end) - self.chance(start))

    def hours(self, start: float, end: float) -> float:
        """Expected hours held in [start, end]: held until the user is back (or the end)."""
        if end <= start:
            return 0.0
        step = (end - start) / _STEPS
        away = [1.0 - self.chance(start + step * (k + 0.5)) for k in range(_STEPS)]
        return sum(away) * step / 3600.0


def _plan(
    action: str, at: float, until: float, cost: float, saves: float, chance: float, why: str
) -> WarmPlan:
    return WarmPlan(
        action=action,  # type: ignore[arg-type]
        at=at,
        ttl="1h",
        covers_until=until,
        cost=cost,
        saves=saves,
        chance=chance,
        reason=why,
    )


def _extension(
    held: Stored,
    idle: Idle,
    policy: TimePolicy,
    gaps: Sequence[float],
    now: float,
    start: float,
    gain: float,
    rate: float,
) -> tuple[float, WarmPlan | None]:
    """The best extension of `held`, decided as it would be made, a margin before the
    expiry: seen from then, with the user still away, what returns after the current
    expiry it would serve against the storage it adds."""
    at = max(now, held.expires_at - policy.margin)
    later = _Returns(gaps=gaps, elapsed=at - idle.idle_since, policy=policy)
    left = held.expires_at - at
    begin = max(left, start - (at - now))
    options = []
    for ttl in TTLS:
        end = left + ttl
        if at + ttl - now > policy.horizon:
            break
        chance = later.between(begin, end)
        storage = rate * held.tokens * later.hours(left, end)
        value = chance * gain * held.tokens - storage
        why = (
            f"extend: {held.tokens:,} tokens kept {ttl / 60:.0f} min more for "
            f"{storage:,.0f} of storage against a {gain * held.tokens:,.0f} saving "
            f"(chance of a return then {chance:.0%})"
        )
        plan = _plan("cache_extend", at, at + end, storage, value + storage, chance, why)
        options.append((value, plan))
    return _shortest(options)


def decide_storage(
    idle: Idle,
    info: ModelInfo,
    policy: TimePolicy,
    *,
    now: float,
    held: Stored | None,
    calls_per_turn: float = 1.0,
    gaps: Sequence[float] = (),
) -> tuple[float, WarmPlan | None]:
    """The best storage action and its net value (base-input tokens): a plan to create,
    extend or delete a cache (`action` "cache_create", "cache_extend", "cache_delete";
    `covers_until` the new expiry), or None when nothing is to be done (keeping the held
    cache as it is, or having none). `held` must still hold a prefix of the history."""
    rate = storage_rate(info)
    trust = min(max(policy.implicit_trust, 0.0), 1.0)
    delete = (
        _plan("cache_delete", now, now, 0.0, 0.0, 0.0, "nothing is worth keeping it for")
        if held is not None
        else None
    )
    if rate is None or not policy.enabled:
        return 0.0, delete
    live_until = idle.refreshed_at + idle.live_for
    start = max(0.0, live_until - policy.margin - now) if trust > 0 else 0.0
    returns = _Returns(gaps=gaps, elapsed=now - idle.idle_since, policy=policy)
    reads = 1.0 + (1.0 - trust) * max(calls_per_turn - 1.0, 0.0)
    gain = max(info.write_5m - info.read, 0.0) * reads
    best: tuple[float, WarmPlan | None] = (0.0, delete)
    if held is not None:
        rem = held.expires_at - now
        keep = returns.between(start, rem) * gain * held.tokens
        keep -= rate * held.tokens * returns.hours(0.0, rem)
        extra, extend = _extension(held, idle, policy, gaps, now, start, gain, rate)
        kept = keep + max(extra, 0.0)
        if kept > best[0]:
            best = (kept, extend if extra > 0 else None)
    tokens = idle.cached + idle.tail
    options = []
    for ttl in TTLS if tokens >= info.min_cacheable else ():
        if start + ttl > policy.horizon:
            break
        chance = returns.between(start, start + ttl)
        cost = info.write_1h * tokens + rate * tokens * returns.hours(start, start + ttl)
        value = chance * gain * tokens - cost
        at = now + start
        why = (
            f"create: {tokens:,} tokens stored {ttl / 60:.0f} min for {cost:,.0f} "
            f"(creation and storage) against a {gain * tokens:,.0f} saving (chance of "
            f"a return {chance:.0%})"
        )
        options.append(
            (value, _plan("cache_create", at, at + ttl, cost, value + cost, chance, why))
        )
    created = _shortest(options)
    return created if created[1] is not None and created[0] > best[0] else best


def decide_head(info: ModelInfo, policy: TimePolicy, *, tokens: int, now: float) -> WarmPlan | None:
    """Before a new session's first call: a plan to create a cache of its tools and system
    prompt alone (`tokens` of them) for `HEAD_TTL`, or None where the model has no explicit
    caches, the implicit cache is fully trusted (`TimePolicy.implicit_trust`), the policy
    is off, or the tools and system are below the model's minimum for a cache."""
    rate = storage_rate(info)
    trusted = policy.implicit_trust >= 1.0
    if rate is None or trusted or not policy.enabled or tokens < info.min_cacheable:
        return None
    # creation and storage (what a deletion leaves unused is given back), against what
    # each later call saves by reading them where the implicit cache is not counted on
    cost = info.write_1h * tokens + rate * tokens * HEAD_TTL / 3600.0
    saves = (1.0 - max(policy.implicit_trust, 0.0)) * (info.write_5m - info.read) * tokens
    why = (
        f"create: the tools and system prompt ({tokens:,} tokens) stored before the first "
        f"call, so that call and every later one read them"
    )
    return _plan("cache_create", now, now + HEAD_TTL, cost, saves, 1.0, why)
