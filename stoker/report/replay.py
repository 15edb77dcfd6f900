"""What a miss cost and what its fix would have saved, from the exact accountant.

The calls of a lineage tree are replayed, in the order they were made and at the times
they started, through a fresh `AnthropicAccountant` (the algorithm the simulator bills
with): once as sent, which must reproduce every recorded usage or nothing here is
trusted, and once per miss with its fix applied: a prefix change undone (every call
that sent the new prefix sends the previous one instead), or, for an expiry, every
breakpoint written with the 1-hour TTL. The difference in cost, call by call, is
what the change cost; the first changed call's share is the miss's own cost.

Replay covers the Anthropic regime: OpenAI's routing by cache key across machines is not
in a record, so an OpenAI lineage's misses are costed from their own usage only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from stoker.cache.accounting import AnthropicAccountant, AnthropicSettings
from stoker.errors import StokerError
from stoker.report.lineage import StoredCall
from stoker.wire.dialects.anthropic import render_request
from stoker.wire.prefix import Prefix
from stoker.wire.request import Request, Ttl
from stoker.wire.usage import Usage


def _input(usage: Usage) -> Usage:
    return Usage(
        uncached=usage.uncached,
        written_5m=usage.written_5m,
        written_1h=usage.written_1h,
        read=usage.read,
    )


def replay(
    calls: Sequence[StoredCall],
    *,
    swap: Mapping[str, Prefix] | None = None,
    ttl: Ttl | None = None,
) -> list[Usage] | None:
    """The usage (output as recorded) of every call replayed in order, each call whose
    prefix key is in `swap` sending that prefix instead, and every breakpoint with `ttl`
    when given; None when a call cannot be replayed (not rebuilt from the store, or
    rejected by the accountant)."""
    accountant = AnthropicAccountant(AnthropicSettings())
    swap = swap or {}
    out: list[Usage] = []
    for call in calls:
        request = call.request
        if request is None:
            return None
        prefix = swap.get(call.record.fingerprints.prefix_key, request.prefix)
        breakpoints = request.breakpoints
        if ttl is not None:
            breakpoints = tuple(replace(b, ttl=ttl) for b in breakpoints)
        request = Request(prefix=prefix, messages=request.messages, breakpoints=breakpoints)
        try:
            outcome = accountant.account(render_request(request), at=call.record.started_at)
        except StokerError:
            return None
        out.append(
            Usage(
                uncached=outcome.usage.uncached,
                written_5m=outcome.usage.written_5m,
                written_1h=outcome.usage.written_1h,
                read=outcome.usage.read,
                output=call.record.usage.output,
            )
        )
    return out


def faithful(calls: Sequence[StoredCall]) -> list[Usage] | None:
    """The as-sent replay, when it reproduces every recorded call's input buckets exactly
    (a real provider's eviction or a concurrent client makes it differ: then None)."""
    replayed = replay(calls)
    if replayed is None:
        return None
    if any(_input(u) != _input(c.record.usage) for u, c in zip(replayed, calls, strict=True)):
        return None
    return replayed
