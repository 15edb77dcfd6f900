"""Automatic prefix caches, computed exactly, as pure code: DeepSeek's cache prefix units,
vLLM's blocks, and the token grid of other implicit caches (Gemini through OpenRouter).

The rules and what is assumed are in docs/provider-caching.md ("DeepSeek", "Self-hosted
servers", "OpenRouter"). A Chat Completions body is rendered as a token stream with a
prefix key at any token (`_openai_render`, the model table's encoding standing in for the
model's own tokenizer and chat template); only what the model reads is rendered (tools
and messages), so a changed `response_format` or `tool_choice` moves nothing.

* **units** (DeepSeek): a request reads the longest *cache prefix unit* it fully
  contains. Units are persisted at the end of each request's input, at fixed intervals
  of a long input, and at the longest prefix a request shares with a recent one (the
  common-prefix detection). A unit is stored in whole `unit`-token pieces: a hit reads
  its length rounded down to a multiple of `unit`, and a unit shorter than one piece is
  not stored [inferred from "64 tokens as a storage unit"]. An unused unit lives
  `idle_ttl`.
* **grid**: entries every `unit` tokens; a request reads the longest run of them from
  the start (vLLM: its full KV blocks, never the prompt's last token, no TTL, least
  recently used blocks evicted past `max_entries`).

Every miss is billed as input: these caches charge nothing for writes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from stoker.cache.accounting._openai_render import Rendered, render
from stoker.cache.accounting._state import EntryStore, PerScope, ScopedAccountant, SettingsT
from stoker.cache.accounting.outcome import CacheBreakpoint, CacheOutcome, MissFact, outcome
from stoker.cache.models import ModelInfo
from stoker.cache.tokens import tokenizer_for
from stoker.errors import ConfigError
from stoker.wire.dialects._chain import DEFAULT_CAPACITY, ChainMemo
from stoker.wire.usage import Usage

FOREVER = float("inf")
_READ_FIELDS = ("tools", "messages")  # what the model reads; the rest keys nothing


def token_stream(
    payload: dict[str, Any], info: ModelInfo, *, org: str, memo: ChainMemo, trusted: bool
) -> Rendered:
    """The tools and messages of a Chat body as tokens with keys at every position."""
    body = {k: payload[k] for k in _READ_FIELDS if k in payload}
    return render(
        body,
        "chat",
        model=info.name,
        org=org,
        hidden=0,
        ttls=("30m", "12h"),
        memo=memo,
        tokenizer=tokenizer_for(info),
        keep_tokens=True,
        trusted=trusted,
    )


def input_end(r: Rendered) -> int:
    """Where the messages end: the reply's priming that follows them is no input."""
    return r.segments[-1].start if r.segments else 0


def common_prefix(a: Rendered, b: Rendered, *, step: int = 1, limit: int | None = None) -> int:
    """The longest prefix (a multiple of `step` tokens, at most `limit`) that `a` and `b`
    share: keys are chained, so equal at a position means equal before it."""
    hi = min(a.total, b.total, limit if limit is not None else a.total) // step
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        p = mid * step
        if a.key(p) == b.key(p):
            lo = mid
        else:
            hi = mid - 1
    return lo * step


@dataclass(frozen=True, slots=True, kw_only=True)
class ImplicitSettings:
    """The knobs of the implicit caches; defaults follow the docs or say what is assumed.

    `mode`: "units" (DeepSeek) or "grid" (every `unit` tokens). `interval`: DeepSeek's
    "fixed token intervals" of long inputs, unpublished [assumed 4,096]. `recent`:
    requests per workspace the common-prefix detection compares with [assumed].
    `build_seconds`: DeepSeek's "cache construction takes seconds": a unit is readable
    that long after the request that persisted it starts (0: the next request of a
    conversation starts after this one's answer, which takes longer). `cap_last_token`:
    vLLM recomputes the prompt's last token, so at most `total - 1` tokens are read.
    `max_entries`: entries kept per workspace (vLLM: KV blocks), least recently used
    dropped first. `unit` / `idle_ttl` override the model table's.
    """

    mode: Literal["units", "grid"] = "units"
    unit: int | None = None
    idle_ttl: float | None = None
    interval: int = 4096
    recent: int = 32
    build_seconds: float = 0.0
    cap_last_token: bool = False
    max_entries: int | None = None
    forget_after: float = 86400.0
    memo_capacity: int = DEFAULT_CAPACITY

    def __post_init__(self) -> None:
        if self.unit is not None and self.unit < 1:
            raise ConfigError(f"unit must be at least 1 token, not {self.unit}")
        if self.interval < 1 or self.recent < 0 or self.build_seconds < 0:
            raise ConfigError("interval must be positive; recent and build_seconds not negative")


class _Rendering(Protocol):
    renders: ChainMemo  # what the scope's requests rendered, for the next to reuse


RenderingT = TypeVar("RenderingT", bound=_Rendering)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatCall:
    """A Chat request rendered as a token stream, with what its reuse depends on."""

    r: Rendered
    payload: dict[str, Any]
    info: ModelInfo
    at: float
    workspace: str


class StreamAccountant(PerScope[SettingsT, RenderingT]):
    """A cache over a Chat body's token stream (the implicit caches, llama.cpp's slots):
    every such accountant renders the body the same way against its scope's memo and
    differs only in what it reuses of the stream (`_reuse`)."""

    __slots__ = ()

    def account(
        self,
        payload: dict[str, Any],
        info: ModelInfo,
        *,
        at: float,
        workspace: str = "default",
        trusted: bool = False,
    ) -> CacheOutcome:
        """The tokens a Chat request that starts at `at` reads, and what it leaves cached."""
        state = self._scope(workspace)
        r = token_stream(payload, info, org=workspace, memo=state.renders, trusted=trusted)
        call = ChatCall(r=r, payload=payload, info=info, at=at, workspace=workspace)
        return self._reuse(call, state)

    def _reuse(self, call: ChatCall, state: RenderingT) -> CacheOutcome:
        raise NotImplementedError


class ImplicitAccountant(
    ScopedAccountant[ImplicitSettings], StreamAccountant[ImplicitSettings, EntryStore]
):
    """Entries per workspace and the implicit algorithms over them. Not thread-safe."""

    __slots__ = ("_points", "_recent")

    def __init__(self, settings: ImplicitSettings | None = None) -> None:
        super().__init__(settings or ImplicitSettings())
        self._recent: dict[str, deque[Rendered]] = {}
        self._points: dict[str, deque[int]] = {}  # where common prefixes were persisted

    def reset(self) -> None:
        super().reset()
        self._recent.clear()
        self._points.clear()

    def _reuse(self, call: ChatCall, store: EntryStore) -> CacheOutcome:
        """Reads, and the free writes."""
        s = self._settings
        r, info, at, workspace = call.r, call.info, call.at, call.workspace
        store.purge(at)
        unit = s.unit or info.unit
        ttl = s.idle_ttl if s.idle_ttl is not None else info.idle_ttl
        live_for = FOREVER if ttl is None else ttl
        end = input_end(r)
        if end < max(unit, info.min_cacheable):
            fact = MissFact(
                cause="below_minimum", tokens=end, minimum=max(unit, info.min_cacheable)
            )
            return outcome(Usage(uncached=r.total), blocks=len(r.segments), misses=(fact,))
        if s.mode == "grid":
            cap = r.total - 1 if s.cap_last_token else r.total
            grid = list(range(unit, cap + 1, unit))
            keys = r.keys(grid, store.renders)
            hit = 0
            for p in grid:  # the run of live entries from the start
                if not store.readable(keys[p], at):
                    break
                hit = p
            if hit < info.min_cacheable:
                hit = 0
            read = hit
            writes = list(range(unit, r.total + 1, unit))
            candidates = [p for p in reversed(grid) if p > hit]
        else:
            points = self._candidates(r, workspace, end)
            keys = r.keys(points, store.renders)
            hit = max((p for p in points if store.readable(keys[p], at)), default=0)
            read = hit // unit * unit
            writes = self._units(r, workspace, end, hit)
            candidates = [p for p in reversed(points) if p > hit]
        misses = _dead(store, keys, candidates, at)
        written = [p for p in writes if p >= unit and (p > hit or s.mode == "grid")]
        all_keys = {**keys, **r.keys([p for p in written if p not in keys], store.renders)}
        for p in written:
            store.write(
                all_keys[p],
                tokens=p // unit * unit,
                ttl="idle",
                expires_at=at + live_for,
                available_at=at + s.build_seconds,
                at=at,
            )
        if hit:
            store.touch(keys[hit], expires_at=at + live_for, at=at)
        breakpoints = tuple(
            CacheBreakpoint(index=r.segment_at(p) or 0, ttl="idle", tokens=p // unit * unit)
            for p in writes[-1:]
        )
        usage = Usage(uncached=r.total - read, read=read)
        return outcome(
            usage,
            blocks=len(r.segments),
            breakpoints=breakpoints,
            hit_index=r.segment_at(read) if read else None,
            misses=misses[:1],
        )

    def _candidates(self, r: Rendered, workspace: str, end: int) -> list[int]:
        """Where a unit this request fully contains can end: at a message's end (every
        request's input ends at one), at the fixed intervals, at a persisted common prefix."""
        found = {e for e in r.ends if 0 < e <= end}
        found.update(range(self._settings.interval, end + 1, self._settings.interval))
        found.update(p for p in self._points.get(workspace, ()) if p <= end)
        return sorted(found)

    def _units(self, r: Rendered, workspace: str, end: int, hit: int) -> list[int]:
        """The units this request persists: its input's end, the fixed intervals of a long
        input, and the longest prefix it shares with a recent request of the workspace."""
        s = self._settings
        points = {end}
        points.update(range(s.interval, end + 1, s.interval))
        recent = self._recent.setdefault(workspace, deque(maxlen=s.recent or None))
        if s.recent:
            shared = max((common_prefix(r, o, limit=end) for o in recent), default=0)
            if shared > hit:
                points.add(shared)
                self._points.setdefault(workspace, deque(maxlen=s.recent * 4)).append(shared)
            recent.append(r)
        return sorted(points)


def _dead(
    store: EntryStore, keys: dict[int, str], positions: list[int], at: float
) -> list[MissFact]:
    """The longest entry beyond the read that exists and cannot be read now, and why."""
    for p in positions:
        fact = store.miss(keys[p], at, tokens=p)
        if fact is not None:
            return [fact]
    return []
