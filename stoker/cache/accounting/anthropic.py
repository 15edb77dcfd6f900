"""Anthropic's prompt cache, computed exactly, as pure code.

The rules and what is [inferred] are in docs/provider-caching.md, "Anthropic simulator".

`AnthropicAccountant.account(payload, at=t)` takes a Messages API body as it goes over
the wire and returns what the API would report as cache reads and writes, keeping the
entries it wrote between calls. Every rule the docs leave open is a field of
`AnthropicSettings`.

Token count of a block (a stand-in for Anthropic's tokenizer, via `count_tokens`):

    text               count_tokens(text)
    thinking           count_tokens(thinking)
    redacted_thinking  count_tokens(data)
    tool_use           count_tokens(name) + count_tokens(compact JSON of input, key order kept)
    tool_result        count_tokens(content) for a string, else the sum over its blocks
    image              width * height / 750 after Anthropic's resize (stoker.cache.media_tokens);
                       the size read from the bytes, a fixed estimate for a URL or file
    document           count_tokens(text source or content blocks); a PDF per page
                       (text and page image), its pages read from the bytes
    tool definition    count_tokens(name) + count_tokens(description)
                       + count_tokens(compact JSON of input_schema, key order kept)
    anything else      count_tokens(compact JSON of the block)

Lookback positions: a maximal run of consecutive tool_use blocks is one position, and
so is a run of tool_result blocks [doc]. Which index of a run is looked up is not
documented; we check every index of the run, last first, for the price of one position
[inferred]. A breakpoint inside a run starts its window at itself, so the part of the
run after it is not checked.

Work per block is memoized per workspace (bounded by `memo_capacity`), so a call costs
what is new in it; `account(..., trusted=True)` also finds old blocks by identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from stoker.cache.accounting._anthropic_render import Rendered, render
from stoker.cache.accounting._state import EntryStore, ScopedAccountant
from stoker.cache.accounting.outcome import CacheBreakpoint, CacheOutcome, MissFact, outcome
from stoker.cache.models import model_info
from stoker.errors import ConfigError, InvalidRequest
from stoker.wire.dialects._chain import DEFAULT_CAPACITY, ChainMemo
from stoker.wire.usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicSettings:
    """The knobs of the Anthropic simulation; defaults follow the docs.

    `ttft`: seconds after a request starts until its entries are readable ("an entry only
    becomes available after the first response begins"). `tail_overhead`: uncached
    tokens after the last block (turn markers; 1-8 observed). `refresh_earlier_breakpoints`:
    also refresh or create, free, the entries of breakpoints the read already covers
    [inferred]. `max_entries`: LRU capacity per workspace, to mimic best-effort eviction.
    `collapse_tool_runs`: count a run of tool_use / tool_result blocks as one position.
    `forget_after`: how long an expired entry is remembered to explain a miss (memory only).
    `memo_capacity`: rendered blocks remembered per workspace (memory only, never billing).
    """

    ttft: float = 0.0
    tail_overhead: int = 0
    lookback: int = 20
    refresh_earlier_breakpoints: bool = True
    ttl_seconds: dict[str, float] = field(default_factory=lambda: {"5m": 300.0, "1h": 3600.0})
    min_cacheable: dict[str, int] = field(default_factory=dict)
    max_entries: int | None = None
    collapse_tool_runs: bool = True
    forget_after: float = 86400.0
    memo_capacity: int = DEFAULT_CAPACITY

    def __post_init__(self) -> None:
        if self.lookback < 1:
            raise ConfigError(f"lookback must be at least 1 position, not {self.lookback}")
        if self.max_entries is not None and self.max_entries < 1:
            raise ConfigError(f"max_entries must be at least 1 (or None), not {self.max_entries}")
        if self.ttft < 0 or self.tail_overhead < 0:
            raise ConfigError("ttft and tail_overhead cannot be negative")
        if self.memo_capacity < 2:
            raise ConfigError(f"memo_capacity must be at least 2, not {self.memo_capacity}")
        if set(self.ttl_seconds) != {"5m", "1h"}:
            raise ConfigError("ttl_seconds needs exactly the keys '5m' and '1h'")

    def minimum_for(self, model: str) -> int:
        """Shortest cacheable prefix: a per-model override, else the model table."""
        info = model_info(model)
        return self.min_cacheable.get(model, self.min_cacheable.get(info.name, info.min_cacheable))


class AnthropicAccountant(ScopedAccountant[AnthropicSettings]):
    """Entries per workspace and the simulator's algorithm over them. Not thread-safe."""

    __slots__ = ()

    def __init__(self, settings: AnthropicSettings | None = None) -> None:
        super().__init__(settings or AnthropicSettings())

    def account(
        self,
        payload: dict[str, Any],
        *,
        at: float,
        workspace: str = "default",
        trusted: bool = False,
    ) -> CacheOutcome:
        """Reads and writes of a request that starts at `at`; updates the entries.

        Raises `InvalidRequest` for what the API rejects with HTTP 400 (too many
        breakpoints, a 1h breakpoint after a 5m one, markers on thinking or empty text).
        """
        s = self._settings
        model = payload.get("model")
        if not isinstance(model, str):
            raise InvalidRequest("model: Field required", provider="anthropic")
        info = model_info(model)
        store = self._scope(workspace)
        r = render(
            payload,
            info,
            workspace=workspace,
            collapse_tool_runs=s.collapse_tool_runs,
            memo=store.renders,
            trusted=trusted,
        )
        store.purge(at)
        total = (r.blocks[-1].cum if r.blocks else 0) + s.tail_overhead
        breakpoints = tuple(
            CacheBreakpoint(index=m.index, ttl=m.ttl, tokens=r.blocks[m.index].cum)
            for m in r.markers
        )
        blocks = r.blocks
        if not r.markers:
            fact = MissFact(cause="no_breakpoints")
            return outcome(Usage(uncached=total), blocks=len(blocks), misses=(fact,))
        minimum = s.minimum_for(model)
        last = blocks[r.markers[-1].index].cum
        if last < minimum:
            fact = MissFact(cause="below_minimum", tokens=last, minimum=minimum)
            return outcome(
                Usage(uncached=total), blocks=len(blocks), breakpoints=breakpoints, misses=(fact,)
            )

        hit = self._lookup(r, store, at)
        read = blocks[hit].cum if hit is not None else 0
        long_end = max(
            (c for m in r.markers if m.ttl == "1h" and (c := blocks[m.index].cum) > read),
            default=read,
        )
        usage = Usage(
            uncached=total - last, written_5m=last - long_end, written_1h=long_end - read, read=read
        )
        misses = self._misses(r, store, at, read)
        self._update(r, store, at, minimum, hit)
        return outcome(
            usage, blocks=len(blocks), breakpoints=breakpoints, hit_index=hit, misses=misses
        )

    def _window(self, r: Rendered, index: int) -> Iterator[list[int]]:
        """The positions a breakpoint checks, nearest first, each as block indices last-first."""
        return islice(r.positions(index), self._settings.lookback)

    def _lookup(self, r: Rendered, store: EntryStore, at: float) -> int | None:
        """Scan from the last breakpoint backwards, `lookback` positions per breakpoint."""
        for marker in reversed(r.markers):
            for position in self._window(r, marker.index):
                for i in position:
                    if store.readable(r.key(i), at):
                        return i
        return None

    def _misses(self, r: Rendered, store: EntryStore, at: float, read: int) -> list[MissFact]:
        """Per breakpoint beyond the read: a live entry just beyond its window (what a
        breakpoint closer to it would have read), and the nearest dead entry in it."""
        facts: list[MissFact] = []
        seen: set[int | None] = set()
        for marker in reversed(r.markers):
            if r.blocks[marker.index].cum <= read:
                continue
            beyond = self._beyond_window(r, store, at, marker.index, read)
            dead = self._dead_entry(r, store, at, marker.index, read)
            for fact in (beyond, dead):
                if fact is not None and fact.index not in seen:
                    seen.add(fact.index)
                    facts.append(fact)
        return facts

    def _dead_entry(
        self, r: Rendered, store: EntryStore, at: float, index: int, read: int
    ) -> MissFact | None:
        for position in self._window(r, index):
            for i in position:
                block = r.blocks[i]
                if block.cum <= read:
                    return None
                fact = store.miss(r.key(i), at, index=i, tokens=block.cum)
                if fact is not None:
                    return fact
        return None

    def _beyond_window(
        self, r: Rendered, store: EntryStore, at: float, index: int, read: int
    ) -> MissFact | None:
        lookback = self._settings.lookback
        for back, position in enumerate(islice(r.positions(index), lookback, None), lookback):
            for i in position:
                block = r.blocks[i]
                if block.cum <= read:
                    return None
                if store.readable(r.key(i), at):
                    return MissFact(
                        cause="lookback", index=i, tokens=block.cum, positions_back=back
                    )
        return None

    def _update(
        self, r: Rendered, store: EntryStore, at: float, minimum: int, hit: int | None
    ) -> None:
        """Write past the read, refresh (free) what the read covers, refresh the hit."""
        s = self._settings
        read = r.blocks[hit].cum if hit is not None else 0
        for marker in r.markers:
            block = r.blocks[marker.index]
            if block.cum < minimum or marker.index == hit:
                continue
            if block.cum <= read and not s.refresh_earlier_breakpoints:
                continue
            store.write(
                r.key(marker.index),
                tokens=block.cum,
                ttl=marker.ttl,
                expires_at=at + s.ttl_seconds[marker.ttl],
                available_at=at + s.ttft,
                at=at,
            )
        if hit is not None:
            key = r.key(hit)
            entry = store.get(key)
            if entry is not None:
                store.touch(key, expires_at=at + s.ttl_seconds[entry.ttl], at=at)


def prefix_blocks(
    payload: dict[str, Any], *, workspace: str = "default", memo: ChainMemo | None = None
) -> list[tuple[str, int]]:
    """(cache key, tokens) of each block of `payload` in render order: what "every distinct
    prefix token written once" counts when a benchmark holds a session to the ideal.
    `memo` (kept across calls) renders only what the previous payloads did not hold."""
    model = payload.get("model")
    if not isinstance(model, str):
        raise InvalidRequest("model: Field required", provider="anthropic")
    r = render(
        payload,
        model_info(model),
        workspace=workspace,
        collapse_tool_runs=True,
        memo=ChainMemo() if memo is None else memo,
    )
    return [(r.key(i), block.tokens) for i, block in enumerate(r.blocks)]
