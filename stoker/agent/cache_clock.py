"""The cache clock: how long a session's prefix stays cached, and what its next message
costs now against after the entry expires.

Users of agent tools ask both questions and no tool answers them; Stoker knows both from
what it already records. The newest call (a turn's, or a keep-warm's) left an entry that
covers the tokens it read and wrote (an implicit cache: all of its input), for the TTL
of its newest breakpoint (an implicit cache: the model's idle lifetime) from the moment
it started (`CacheState.after_refresh` keeps the same arithmetic for the time
policy). The next message sends that entry plus what came after it: the call's uncached
input and its answer (a turn), or nothing (a keep-warm wrote to the end), plus the new
message itself.

- *now*: the entry is read at the cache-read price, the new tokens written as the
  newest breakpoint writes them (at its TTL's write price; at the input price where the
  provider caches implicitly);
- *cold*: after expiry all of it is written again at that write price.

Both are input only (the answer's length is not known yet) and in USD (None when the
model has no price). The time policy's plan for the gap (a ping or seal before expiry,
or letting it expire) is carried with its price when the caller has one: a live session
does (`Session.warm_plan`), a view built from the store alone does not.

`stoker chat`, the gateway's session JSON and its dashboard all show this one value.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from stoker.agent.calls import live_for
from stoker.cache.models import ModelInfo, same_model
from stoker.cache.pricing import cost_usd
from stoker.cache.time_policy import WarmPlan
from stoker.wire.record import CacheRecord
from stoker.wire.request import Ttl
from stoker.wire.usage import Usage

REFRESHING = ("turn", "ping", "seal")
"""Purposes of the calls that leave the session's entry (not an explicit cache's
create, extend or delete, which the storage decision accounts for)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedWarm:
    """The time policy's plan for the idle gap: `action` ("ping", "seal", "expire", or an
    explicit cache's lifecycle step) at `at`, keeping the entry until `covers_until`, for
    `cost_usd` (None: no price, or nothing sent)."""

    action: str
    at: float
    covers_until: float
    cost_usd: float | None
    reason: str

    @property
    def sends(self) -> bool:
        return self.action != "expire"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheClock:
    """A session's cache clock. `warm_until` is None when nothing is cached for the next
    message (no call yet, a prefix under the model's minimum, or a switch to another
    model since the last call); then both costs are the same."""

    model: str
    cached_tokens: int = 0
    new_tokens: int = 0
    ttl: Ttl | None = None
    refreshed_at: float | None = None
    warm_until: float | None = None
    next_cost_now: float | None = None
    next_cost_cold: float | None = None
    planned: PlannedWarm | None = None
    uncached_why: str = ""  # when `warm_until` is None after a call: why nothing is read

    def seconds_left(self, now: float) -> float:
        """Seconds the entry still lives at `now` (0 once it expired or when none)."""
        return 0.0 if self.warm_until is None else max(0.0, self.warm_until - now)

    def next_cost(self, now: float) -> float | None:
        """What the next message costs if sent at `now`."""
        return self.next_cost_now if self.seconds_left(now) > 0 else self.next_cost_cold

    def to_dict(self) -> dict[str, Any]:
        return {
            "warm_until": self.warm_until,
            "next_cost_now": self.next_cost_now,
            "next_cost_cold": self.next_cost_cold,
            "cached_tokens": self.cached_tokens,
            "new_tokens": self.new_tokens,
            "cache_ttl": self.ttl,
            "planned": None if self.planned is None else self.planned.to_dict(),
        }

    def lines(self, now: float) -> list[str]:
        """The clock in words, for a terminal (times in the local zone)."""
        if self.refreshed_at is None:
            return ["cache: nothing sent yet"]
        cost = f"input {money(self.next_cost_cold)}"
        if self.warm_until is None:
            return [f"cache: nothing cached ({self.uncached_why}) · next message {cost}"]
        left = self.seconds_left(now)
        ends = f"{_at(self.warm_until)} ({_duration(left)} left)" if left else "expired"
        out = [
            f"cache: {self.cached_tokens:,} tokens warm until {ends} · next message: "
            f"input {money(self.next_cost_now)} now, {money(self.next_cost_cold)} after "
            "expiry (+ your message)"
        ]
        if self.planned is not None and self.planned.sends:
            out.append(
                f"keep-warm: {self.planned.action} at {_at(self.planned.at)} for "
                f"{money(self.planned.cost_usd)}, keeps it until "
                f"{_at(self.planned.covers_until)}"
            )
        elif self.planned is not None:
            out.append(f"keep-warm: none planned ({self.planned.reason})")
        return out


def cache_clock(
    records: Sequence[CacheRecord],
    info: ModelInfo,
    *,
    plan: WarmPlan | None = None,
    message_tokens: int = 0,
) -> CacheClock:
    """The clock of a session whose calls are `records` (in order, keep-warm included),
    on the model `info` describes; `plan` is the time policy's, `message_tokens` the
    next message's size if known (0: the figures leave it out)."""
    last = next((r for r in reversed(records) if r.purpose in REFRESHING), None)
    planned = _planned(plan, info)
    if last is None:
        return CacheClock(model=info.name, planned=planned)
    usage = last.usage
    cached = usage.read + usage.written
    if not info.ttls and usage.input_total >= info.min_cacheable:
        # An implicit cache (OpenAI, Gemini, DeepSeek) holds the whole input it saw, and
        # reports no write: the usage says only what was read.
        cached = max(cached, usage.input_total)
    after = usage.input_total - cached + usage.output if last.purpose == "turn" else 0
    new = after + message_tokens

    def cold(new_tokens: int, sent: Usage, why: str) -> CacheClock:
        """Nothing is read next: the message costs `sent` now or later alike."""
        cost = cost_usd(sent, info)
        return CacheClock(
            model=info.name,
            new_tokens=new_tokens,
            refreshed_at=last.started_at,
            next_cost_now=cost,
            next_cost_cold=cost,
            planned=planned,
            uncached_why=why,
        )

    if not same_model(last.model, info.name):  # switched (/model): nothing is read
        return cold(
            usage.input_total + new,
            _written(usage.input_total + new, None, info),
            f"the cache is {last.model}'s; the next message goes to {info.name}",
        )
    if not cached:
        return cold(
            new,
            Usage(uncached=usage.input_total + new),
            f"the prompt is under the model's {info.min_cacheable:,}-token minimum",
        )
    ttl = last.breakpoints[-1].ttl if last.breakpoints else None
    return CacheClock(
        model=info.name,
        cached_tokens=cached,
        new_tokens=new,
        ttl=ttl,
        refreshed_at=last.started_at,
        warm_until=last.started_at + live_for(info, ttl),
        next_cost_now=cost_usd(Usage(read=cached) + _written(new, ttl, info), info),
        next_cost_cold=cost_usd(_written(cached + new, ttl, info), info),
        planned=planned,
    )


def _written(tokens: int, ttl: Ttl | None, info: ModelInfo) -> Usage:
    """`tokens` as the next call's breakpoint writes them: in the bucket of its TTL where
    requests choose TTLs, else as plain input (an implicit cache bills no write)."""
    if not info.ttls:
        return Usage(uncached=tokens)
    return Usage(written_1h=tokens) if ttl == "1h" else Usage(written_5m=tokens)


def _planned(plan: WarmPlan | None, info: ModelInfo) -> PlannedWarm | None:
    if plan is None:
        return None
    price = info.input  # USD per million base-input tokens, the plan's unit
    cost = 0.0 if not plan.sends else None if price is None else plan.cost * price / 1e6
    return PlannedWarm(
        action=plan.action,
        at=plan.at,
        covers_until=plan.covers_until,
        cost_usd=cost,
        reason=plan.reason,
    )


def money(usd: float | None) -> str:
    """USD with the digits a small figure needs; "no price" when unknown."""
    if usd is None:
        return "no price"
    digits = 2 if abs(usd) >= 1 else 4 if abs(usd) >= 0.01 else 6
    return f"${usd:.{digits}f}"


def _at(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(seconds))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
