"""OpenAI's prompt cache, computed exactly for both regimes, as pure code.

The rules and what is [inferred] are in docs/provider-caching.md, "OpenAI simulator".

`OpenAIAccountant.account(payload, api=..., at=t)` takes a Chat Completions or Responses
body as it goes over the wire. The model table says which regime applies:

* L (before GPT-5.6): implicit boundaries on a token grid, free writes, idle expiry;
  `cached_tokens` is the longest live boundary, rounded down to a multiple of 128.
* N (GPT-5.6+): writes at the latest eligible message ending and explicit
  `prompt_cache_breakpoint`s (paid, 30m / 12h), lookups over a bounded set of boundaries.

Token counts are OpenAI's: the model's encoding (exact), the chat format's framing, the
tool rule and the image and file rules, all in `_openai_counts` (docs/provider-caching.md,
"Token counts"). Every rule the docs leave open is a field of `OpenAISettings`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from stoker.cache.accounting._openai_render import Api, Rendered, render
from stoker.cache.accounting._routing import Routed, Routing
from stoker.cache.accounting._state import EntryStore, ScopedAccountant
from stoker.cache.accounting.outcome import CacheBreakpoint, CacheOutcome, MissFact, outcome
from stoker.cache.models import model_info
from stoker.cache.tokens import tokenizer_for
from stoker.errors import ConfigError, InvalidRequest
from stoker.wire.dialects._chain import DEFAULT_CAPACITY, ChainMemo
from stoker.wire.usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAISettings:
    """The knobs of the OpenAI simulation; defaults follow the docs.

    `hidden_tokens`: OpenAI's own instructions ahead of tools (never reported).
    `lookup`: regime N lookup set, the guide's "endings" (first 2 + latest 50 explicit,
    plus the implicit one, 20 earlier endings and the initial developer block) or OpenAI's
    API reference's "latest80" (the latest 80 boundaries, no lookback limit); they
    conflict (docs/provider-caching.md, "OpenAI breakpoints and TTLs").
    `idle_seconds` / `max_lifetime_seconds`: regime L expiry per `prompt_cache_retention`.
    `default_retention`: regime L retention when the request names none (24h for non-ZDR
    organisations). `ttl_seconds`: regime N TTLs. `grid_anchor`: regime L boundaries at
    `hidden + MIN + k*I` ("minimum") or at `k*I` from the start of the hidden content
    ("start") [inferred]. `cached_granularity`: regime L rounding of `cached_tokens`.
    `bill_hidden_tokens`: count hidden tokens in the reported input total [inferred: no].
    `memo_capacity`: rendered units remembered per organisation (memory only).
    `machines` / `overflow_per_minute` / `route_tokens`: regime L routing. A request goes
    to the machine of its route (its first `route_tokens` tokens after the hidden ones,
    and its key); past `overflow_per_minute` requests a minute on one route it overflows
    to one of the other `machines`, where the prefix is cold. None turns overflow off.
    """

    hidden_tokens: int = 0
    min_cacheable: dict[str, int] = field(default_factory=dict)
    lookup: Literal["endings", "latest80"] = "endings"
    idle_seconds: dict[str, float] = field(
        default_factory=lambda: {"in_memory": 600.0, "24h": 1800.0}
    )
    max_lifetime_seconds: dict[str, float] = field(
        default_factory=lambda: {"in_memory": 3600.0, "24h": 86400.0}
    )
    default_retention: Literal["in_memory", "24h"] = "24h"
    ttl_seconds: dict[str, float] = field(default_factory=lambda: {"30m": 1800.0, "12h": 43200.0})
    ttft: float = 0.0
    grid_anchor: Literal["minimum", "start"] = "minimum"
    cached_granularity: int = 128
    bill_hidden_tokens: bool = False
    max_entries: int | None = None
    forget_after: float = 86400.0
    memo_capacity: int = DEFAULT_CAPACITY
    machines: int = 1024
    overflow_per_minute: float | None = 15.0
    route_tokens: int = 256

    def __post_init__(self) -> None:
        if self.machines < 1 or self.route_tokens < 1:
            raise ConfigError("machines and route_tokens must be at least 1")
        if self.overflow_per_minute is not None and self.overflow_per_minute <= 0:
            raise ConfigError("overflow_per_minute must be positive (or None for no overflow)")
        if self.hidden_tokens < 0 or self.ttft < 0:
            raise ConfigError("hidden_tokens and ttft cannot be negative")
        if self.max_entries is not None and self.max_entries < 1:
            raise ConfigError(f"max_entries must be at least 1 (or None), not {self.max_entries}")
        if set(self.ttl_seconds) != {"30m", "12h"}:
            raise ConfigError("ttl_seconds needs exactly the keys '30m' and '12h'")
        if set(self.idle_seconds) != {"in_memory", "24h"} or set(self.max_lifetime_seconds) != {
            "in_memory",
            "24h",
        }:
            raise ConfigError("idle_seconds and max_lifetime_seconds need 'in_memory' and '24h'")
        if self.cached_granularity < 1:
            raise ConfigError("cached_granularity must be at least 1 token")
        if self.memo_capacity < 2:
            raise ConfigError(f"memo_capacity must be at least 2, not {self.memo_capacity}")

    def minimum_for(self, model: str) -> int:
        """Shortest cacheable (visible) prefix: a per-model override, else the model table."""
        info = model_info(model)
        return self.min_cacheable.get(model, self.min_cacheable.get(info.name, info.min_cacheable))


class OpenAIAccountant(ScopedAccountant[OpenAISettings]):
    """Entries per organisation and the two regimes' algorithms over them. Not thread-safe."""

    __slots__ = ("_routing",)

    def __init__(self, settings: OpenAISettings | None = None) -> None:
        super().__init__(settings or OpenAISettings())
        self._routing: dict[str, Routing] = {}

    def reset(self) -> None:
        super().reset()
        self._routing.clear()

    def account(
        self,
        payload: dict[str, Any],
        *,
        api: Api,
        at: float,
        org: str = "default",
        trusted: bool = False,
    ) -> CacheOutcome:
        """Reads and writes of a request that starts at `at` on `api`'s wire format;
        updates the entries. Raises `InvalidRequest` for a malformed payload or cache option.
        """
        s = self._settings
        model = payload.get("model")
        if not isinstance(model, str):
            raise InvalidRequest("model: a model name is required", provider="openai")
        info = model_info(model)
        if info.provider != "openai":
            raise InvalidRequest(f"model {model!r} is not an OpenAI model", provider="openai")
        store = self._scope(org)
        grid = (info.regime or "L") == "L"
        r = render(
            payload,
            api,
            model=info.name,
            org=org,
            hidden=s.hidden_tokens,
            ttls=tuple(s.ttl_seconds),
            memo=store.renders,
            tokenizer=tokenizer_for(info),
            keep_tokens=grid,
            trusted=trusted,
        )
        store.purge(at)
        minimum = s.minimum_for(model)
        if grid:
            routed = self._route(org, r, at)
            return self._implicit_grid(r, store, at, minimum, info.interval, routed)
        return self._breakpoints(r, store, at, minimum)

    def _billed_total(self, r: Rendered) -> int:
        return r.total - (0 if self._settings.bill_hidden_tokens else r.hidden)

    def _grid(self, r: Rendered, minimum: int, interval: int) -> list[int]:
        first = r.hidden + minimum
        if self._settings.grid_anchor == "start":
            first = max(interval, math.ceil(first / interval) * interval)
        return list(range(first, r.total + 1, interval))

    def _route(self, org: str, r: Rendered, at: float) -> Routed:
        s = self._settings
        routing = self._routing.get(org)
        if routing is None:
            routing = self._routing[org] = Routing(
                machines=s.machines, per_minute=s.overflow_per_minute
            )
        head = min(r.total, r.hidden + s.route_tokens)
        return routing.route(r.key(head) if head > 0 else r.namespace, at)

    def _implicit_grid(
        self,
        r: Rendered,
        store: EntryStore,
        at: float,
        minimum: int,
        interval: int,
        routed: Routed,
    ) -> CacheOutcome:
        """Regime L: read the longest live grid boundary, write (free) every boundary, on
        the machine the request was routed to."""
        s = self._settings
        total = self._billed_total(r)
        bounds = self._grid(r, minimum, interval)
        if not bounds:
            fact = MissFact(cause="below_minimum", tokens=r.total - r.hidden, minimum=minimum)
            return outcome(Usage(uncached=total), blocks=len(r.segments), misses=(fact,))
        keys = _Keys(r, routed.tag)
        keys.fill(bounds, store.renders)  # at once: every boundary is written below
        hit = max((b for b in bounds if store.readable(keys[b], at)), default=None)
        g = s.cached_granularity
        cached = (hit - r.hidden) // g * g if hit is not None else 0
        misses = self._dead(r, store, at, [b for b in reversed(bounds) if b > (hit or 0)], keys)
        if routed.overflowed and hit != bounds[-1]:
            misses.insert(0, MissFact(cause="overflow", requests=routed.recent))
        retention = r.retention or s.default_retention
        idle = s.idle_seconds[retention]
        cap = s.max_lifetime_seconds[retention]
        for b in bounds:
            # Idle expiry: each use restarts the idle timer, up to a cap from creation.
            old = store.get(keys[b])
            created = old.created_at if old is not None and old.expires_at > at else at
            store.write(
                keys[b],
                tokens=b - r.hidden,
                ttl=retention,
                expires_at=min(at + idle, created + cap),
                available_at=at + s.ttft,
                at=at,
            )
        hit_index = r.segment_at(hit) if hit is not None else None
        usage = Usage(uncached=total - cached, read=cached)
        return outcome(usage, blocks=len(r.segments), hit_index=hit_index, misses=misses[:1])

    def _breakpoints(self, r: Rendered, store: EntryStore, at: float, minimum: int) -> CacheOutcome:
        """Regime N: write points, lookup points, the read, and what is written past it."""
        s = self._settings
        hidden = r.hidden
        endings = list(r.endings)
        explicit = [p for p, _ in r.explicit]
        ttl_of: dict[int, str] = {}
        for p, ttl in r.explicit:
            if p not in ttl_of or s.ttl_seconds[ttl] > s.ttl_seconds[ttl_of[p]]:
                ttl_of[p] = ttl
        implicit = r.mode == "implicit"
        writes = set(explicit[-3:] if implicit else explicit[-4:])
        if implicit and endings:
            writes.add(endings[-1])
            ttl_of.setdefault(endings[-1], r.ttl)
        candidates = sorted(set(explicit) | (set(endings) if implicit else set()))
        if s.lookup == "latest80":
            lookups = set(candidates[-80:])
        else:
            lookups = set(explicit[:2]) | set(explicit[-50:])
            if implicit:
                lookups |= set(endings[-21:]) | ({r.dev_end} if r.dev_end is not None else set())
        keys = _Keys(r)
        eligible = [p for p in lookups if p - hidden >= minimum]
        hit = max((p for p in eligible if store.readable(keys[p], at)), default=None)
        read = hit - hidden if hit is not None else 0
        fresh = sorted(p for p in writes if p - hidden >= minimum and p - hidden > read)
        split = {"30m": 0, "12h": 0}
        previous = read
        for p in fresh:
            split[ttl_of[p]] += p - hidden - previous
            previous = p - hidden
        usage = Usage(
            uncached=self._billed_total(r) - previous,
            written_5m=split["30m"],
            written_1h=split["12h"],
            read=read,
        )
        misses = self._breakpoint_misses(
            r, store, at, minimum, writes, lookups, candidates, keys, read
        )
        for p in fresh:
            store.write(
                keys[p],
                tokens=p - hidden,
                ttl=ttl_of[p],
                expires_at=at + s.ttl_seconds[ttl_of[p]],
                available_at=at + s.ttft,
                at=at,
            )
        if hit is not None and (entry := store.get(keys[hit])) is not None:
            store.touch(keys[hit], expires_at=at + s.ttl_seconds[entry.ttl], at=at)
        breakpoints = tuple(
            CacheBreakpoint(index=r.segment_at(p) or 0, ttl=ttl_of[p], tokens=p - hidden)
            for p in sorted(writes)
        )
        hit_index = r.segment_at(hit) if hit is not None else None
        return outcome(
            usage,
            blocks=len(r.segments),
            breakpoints=breakpoints,
            hit_index=hit_index,
            misses=misses,
        )

    def _breakpoint_misses(
        self,
        r: Rendered,
        store: EntryStore,
        at: float,
        minimum: int,
        writes: set[int],
        lookups: set[int],
        candidates: list[int],
        keys: dict[int, str],
        read: int,
    ) -> list[MissFact]:
        hidden = r.hidden
        if not writes:
            return [MissFact(cause="no_breakpoints")]
        longest = max(writes) - hidden
        if longest < minimum:
            return [MissFact(cause="below_minimum", tokens=longest, minimum=minimum)]
        above = [
            p for p in sorted(lookups, reverse=True) if p - hidden > read and p - hidden >= minimum
        ]
        facts = self._dead(r, store, at, above, keys)
        for n, p in enumerate(reversed(candidates)):
            if p in lookups or p - hidden <= read or p - hidden < minimum:
                continue
            if store.readable(keys[p], at):
                tokens = p - hidden
                idx = r.segment_at(p)
                facts.append(MissFact(cause="lookback", index=idx, tokens=tokens, positions_back=n))
                break
        return facts

    def _dead(
        self, r: Rendered, store: EntryStore, at: float, positions: list[int], keys: dict[int, str]
    ) -> list[MissFact]:
        """Facts for positions whose key had an entry that cannot be read now."""
        facts: list[MissFact] = []
        for p in positions:
            fact = store.miss(keys[p], at, index=r.segment_at(p), tokens=p - r.hidden)
            if fact is not None:
                facts.append(fact)
        return facts


class _Keys(dict[int, str]):
    """Prefix keys by token offset, each hashed on first use: most are never looked at.
    `tag` names the machine the keys live on ("" for the route's own)."""

    __slots__ = ("_rendered", "_tag")

    def __init__(self, rendered: Rendered, tag: str = "") -> None:
        super().__init__()
        self._rendered = rendered
        self._tag = tag

    def __missing__(self, position: int) -> str:
        key = self[position] = self._tag + self._rendered.key(position)
        return key

    def fill(self, positions: list[int], memo: ChainMemo) -> None:
        """The keys at `positions` (ascending), at once: one pass per segment, kept in
        `memo` for the next request of the conversation."""
        for position, key in self._rendered.keys(positions, memo).items():
            self[position] = self._tag + key
