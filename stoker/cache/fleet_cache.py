"""One explicit cache of an agent's tools and system prompt for its whole fleet (Gemini).

A session that does not count on the implicit cache caches its tools and system prompt
before its first call (`stoker.cache.storage.decide_head`). Every new session of the same
agent sends the same ones, so a fleet of them would pay for N copies of one prefix, and
storage is billed per token-hour. The first session's cache is the fleet's instead
(`stoker.cache.fleet.SharedCache`, shared with other replicas through their notes): the
sessions that arrive while it lives read it and make none.

Whether the fleet keeps it is arithmetic on its arrival rate. With new sessions arriving
`a` per hour, a cache of `C` tokens costs `s * C` base-input tokens per hour of storage
(`storage_rate`), and each arrival it serves saves making one (`w_c * C`, the creation
billed as input). Keeping it pays while `a * w_c >= s`, whatever its size: on 2.5 Flash
(`s` = 3.3) while sessions arrive at least every 18 minutes on average. Then an arrival
that finds it with less than half of `HEAD_TTL` left extends it by `HEAD_TTL`, and the
session that made it does not delete it at a gap of its own (its user may be gone while
the fleet still arrives). Otherwise it is the session's, kept or deleted by that
session's time policy as before, and a later arrival makes another.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from stoker.cache.fleet import SharedCache
from stoker.cache.models import ModelInfo
from stoker.cache.storage import HEAD_TTL, storage_rate
from stoker.cache.time_policy import TimePolicy, WarmPlan

RECENT = 16
"""Arrival gaps the rate is taken from: the newest say most about the rate now."""


def arrivals_per_hour(gaps: Sequence[float]) -> float | None:
    """The fleet's arrival rate from its newest gaps (seconds); None before two arrivals."""
    recent = [g for g in gaps[-RECENT:] if g >= 0]
    if not recent:
        return None
    mean = fmean(recent)
    return 3600.0 / mean if mean > 0 else float("inf")


def fleet_keeps(info: ModelInfo, policy: TimePolicy, gaps: Sequence[float]) -> bool:
    """Whether keeping the fleet's cache costs less in storage than the creations it saves
    (`a * w_c >= s`, see the module docs)."""
    rate = storage_rate(info)
    arrivals = arrivals_per_hour(gaps)
    if rate is None or arrivals is None or not policy.enabled:
        return False
    return arrivals * info.write_1h >= rate


def decide_extension(
    info: ModelInfo,
    policy: TimePolicy,
    cache: SharedCache,
    *,
    now: float,
    gaps: Sequence[float],
) -> WarmPlan | None:
    """A plan to extend the fleet's cache by `HEAD_TTL` when the fleet keeps it and it has
    less than half of that left; None otherwise."""
    if cache.expires_at - now >= HEAD_TTL / 2 or not fleet_keeps(info, policy, gaps):
        return None
    rate = storage_rate(info) or 0.0
    arrivals = arrivals_per_hour(gaps) or 0.0
    until = now + HEAD_TTL
    hours = (until - cache.expires_at) / 3600.0
    return WarmPlan(
        action="cache_extend",
        at=now,
        ttl="1h",
        covers_until=until,
        cost=rate * cache.tokens * hours,
        saves=arrivals * hours * info.write_1h * cache.tokens,
        chance=1.0,
        reason=(
            f"extend: the fleet's cache of its tools and system prompt ({cache.tokens:,} "
            f"tokens), {arrivals:.1f} new sessions an hour, each saving making one"
        ),
        scope="shared",
    )
