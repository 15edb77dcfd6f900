"""What one request did to a provider's prompt cache, and the facts behind a miss.

Both accountants return a `CacheOutcome`. Its `usage` has the input side only (the model
layer adds output tokens). `misses` are structured facts, not sentences, so the miss
explainer can rank them; `MissFact.describe()` gives a plain sentence for each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stoker.wire.usage import Usage

MissCause = Literal[
    "expired",
    "concurrent",
    "lookback",
    "below_minimum",
    "no_breakpoints",
    "evicted",
    "overflow",
    "rerouted",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MissFact:
    """One reason the request read less than it could have.

    `index` is the block (Anthropic) or segment (OpenAI) whose entry is concerned and
    `tokens` the prefix length that entry covers; the other fields belong to one cause:
    `expired_for`/`idle` (expired), `available_in` (concurrent: written by a request whose
    response had not started), `positions_back` (lookback: 0 is the breakpoint itself),
    `minimum` (below_minimum, with `tokens` the prefix that was too short), `requests`
    (overflow: the route's requests in the trailing minute), `where` (rerouted: the
    router's upstream that served it).
    """

    cause: MissCause
    index: int | None = None
    tokens: int | None = None
    ttl: str | None = None
    expired_for: float | None = None
    idle: float | None = None
    available_in: float | None = None
    positions_back: int | None = None
    minimum: int | None = None
    requests: int | None = None
    where: str | None = None  # rerouted: the upstream the request went to

    def describe(self) -> str:
        """One sentence saying what happened and what would have avoided it."""
        prefix = f"the {self.tokens:,}-token prefix" if self.tokens is not None else "the prefix"
        if self.cause == "expired":
            ttl = f" (TTL {self.ttl})" if self.ttl else ""
            return (
                f"the cache entry for {prefix} expired {self.expired_for or 0:.0f} s ago{ttl}, "
                f"{self.idle or 0:.0f} s after it was last used; send a request (or a keep-warm "
                "ping) before the TTL runs out, or write it with a longer TTL"
            )
        if self.cause == "concurrent":
            return (
                f"{prefix} was written by a request whose response had not started yet; it "
                f"becomes readable in {self.available_in or 0:.1f} s. Wait for the first "
                "response before sending requests that share the prefix"
            )
        if self.cause == "lookback":
            return (
                f"an entry for {prefix} exists {self.positions_back} positions behind the "
                "breakpoint, outside the lookback window; add a breakpoint closer to it"
            )
        if self.cause == "below_minimum":
            return (
                f"{prefix} is shorter than the model's minimum cacheable length of "
                f"{self.minimum or 0:,} tokens, so nothing was cached"
            )
        if self.cause == "overflow":
            return (
                f"the request overflowed to another machine, which does not hold the prefix: "
                f"{self.requests or 0} requests for this prefix and prompt_cache_key in the "
                "last minute, above about 15; spread the traffic over more cache keys"
            )
        if self.cause == "rerouted":
            return (
                f"the router sent this request to {self.where or 'another provider'}, whose "
                f"cache does not hold {prefix}: the conversation's earlier requests went "
                "elsewhere. Send a session key (OpenRouter's session_id) so it sticks to one"
            )
        if self.cause == "no_breakpoints":
            return "the request has no cache breakpoint, so nothing was read or written"
        return (
            f"the cache entry for {prefix} was evicted before its TTL ran out; "
            "the provider's cache is best-effort"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheBreakpoint:
    """Where a request asked for (or implied) a cache write: block index, TTL, prefix tokens."""

    index: int
    ttl: str
    tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheOutcome:
    """The cache effect of one request: usage, where it wrote, where it hit, why it missed."""

    usage: Usage
    total_tokens: int
    blocks: int
    breakpoints: tuple[CacheBreakpoint, ...] = ()
    hit_index: int | None = None
    misses: tuple[MissFact, ...] = ()


def outcome(
    usage: Usage,
    *,
    blocks: int,
    breakpoints: tuple[CacheBreakpoint, ...] = (),
    hit_index: int | None = None,
    misses: tuple[MissFact, ...] | list[MissFact] = (),
) -> CacheOutcome:
    """An outcome whose total is its usage's input: no accountant bills a token twice."""
    return CacheOutcome(
        usage=usage,
        total_tokens=usage.input_total,
        blocks=blocks,
        breakpoints=breakpoints,
        hit_index=hit_index,
        misses=tuple(misses),
    )
