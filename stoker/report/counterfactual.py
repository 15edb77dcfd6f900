"""What other choices would have cost, from the usage a provider reported alone.

Where the requests are at hand the exact accountant replays them (`stoker.report.replay`);
where only usage is (proxied calls the report did not rebuild, a trace an agent
exported), these give the same answers for a conversation that only appends:

- `read_with_fix`: a call, had it read what was cached (or sent) before it;
- `with_breakpoints`: a conversation sent with no cache breakpoint, had it carried
  Stoker's (each call reads what the call before it sent, if that is still live, and
  writes the rest at the short TTL);
- `one_hour`: every write at the long TTL, so a gap under an hour expires nothing;
- `keep_warm`: what Stoker's time policy would have sent across one idle gap, what
  that cost, and whether the entry was still there when the user came back.

Costs are in base-input tokens (one token at the model's plain input price) unless a
function says USD.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stoker.cache.models import ModelInfo
from stoker.cache.time_policy import Idle, TimePolicy, decide, lifetimes
from stoker.wire.usage import Usage

PLACEHOLDER_TOKENS = 16  # a keep-warm's own placeholder message (as `stoker.agent.warmth`)


def read_with_fix(usage: Usage, cached: int) -> Usage:
    """`usage` had the call read the first `cached` tokens: what it wrote of them first
    (5m before 1h), then what it sent uncached, becomes read."""
    missed = max(0, min(cached, usage.input_total) - usage.read)
    from_written = min(missed, usage.written)
    from_5m = min(from_written, usage.written_5m)
    return Usage(
        uncached=usage.uncached - (missed - from_written),
        written_5m=usage.written_5m - from_5m,
        written_1h=usage.written_1h - (from_written - from_5m),
        read=usage.read + missed,
        output=usage.output,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One call of a conversation as a what-if sees it: its usage, what of its input an
    earlier call of the conversation sent (`shared`), and seconds since that call began."""

    usage: Usage
    shared: int
    gap: float | None


def with_breakpoints(steps: Sequence[Step], info: ModelInfo) -> list[Usage]:
    """Each call's usage had it carried breakpoints on the shared prefix and the newest
    block: it reads what it shares with the call before (when that entry lived through
    the gap and reached the model's minimum) and writes the rest at the short TTL."""
    menu = lifetimes(info)
    ttl = menu.short if menu is not None else 300.0
    out = []
    for step in steps:
        u = step.usage
        live = step.gap is not None and step.gap <= ttl and step.shared >= info.min_cacheable
        read = min(step.shared, u.input_total) if live else 0
        written = u.input_total - read if u.input_total >= info.min_cacheable else 0
        out.append(
            Usage(
                uncached=u.input_total - read - written,
                written_5m=written,
                read=read,
                output=u.output,
            )
        )
    return out


def one_hour(
    usages: Sequence[Usage], expired: Sequence[bool], cached: Sequence[int]
) -> list[Usage]:
    """Every write at the long TTL: its 5-minute writes become 1-hour ones, and each call
    marked `expired` (its gap under an hour) reads the `cached` tokens it had lost."""
    out = []
    for usage, lost, before in zip(usages, expired, cached, strict=True):
        fixed = read_with_fix(usage, before) if lost else usage
        out.append(replace(fixed, written_5m=0, written_1h=fixed.written))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptWarm:
    """What the time policy would have done across one gap."""

    pings: int
    seals: int
    cost: float  # base-input tokens
    kept: bool  # the entry was live when the next call started

    @property
    def sent(self) -> int:
        return self.pings + self.seals


def keep_warm(
    *,
    info: ModelInfo,
    policy: TimePolicy,
    started: float,
    back_at: float,
    cached: int,
    tail: int,
    long_lived: bool,
    gaps: Sequence[float],
) -> KeptWarm:
    """Step through a gap as Stoker's keep-warm does: from the call that began at
    `started` (leaving `cached` tokens cached and `tail` more, its answer, to write) to
    the next call at `back_at`, deciding before each expiry with the gaps seen before."""
    menu = lifetimes(info)
    if menu is None:
        return KeptWarm(pings=0, seals=0, cost=0.0, kept=False)
    refreshed, live_for = started, menu.long if long_lived else menu.short
    pings = seals = 0
    spent = 0.0
    while True:
        if back_at < refreshed + live_for:
            return KeptWarm(pings=pings, seals=seals, cost=spent, kept=True)
        idle = Idle(
            refreshed_at=refreshed,
            live_for=live_for,
            idle_since=started,
            cached=cached,
            tail=tail,
            long_lived=long_lived,
            overhead=PLACEHOLDER_TOKENS,
            spent=spent,
        )
        plan = decide(idle, info, policy, gaps=gaps)
        if not plan.sends or plan.at >= back_at:
            return KeptWarm(pings=pings, seals=seals, cost=spent, kept=False)
        spent += plan.cost
        refreshed, live_for = plan.at, plan.covers_until - plan.at
        seals, pings = seals + (plan.action == "seal"), pings + (plan.action == "ping")
        long_lived = long_lived or plan.action == "seal"
        cached, tail = cached + tail, 0  # either wrote the tail
