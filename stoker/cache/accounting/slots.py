"""llama.cpp's `llama-server` prompt cache, computed exactly, as pure code: one KV cache
per slot, reused up to the longest common prefix.

The rules (docs/provider-caching.md, "llama.cpp"): a request without `id_slot` goes to
the idle slot whose cached prompt shares the longest prefix with it, when that prefix is
more than `similarity` of the request's tokens (`--slot-prompt-similarity`, 0.10), else
to the least recently used slot. With `cache_prompt` (the default) the slot's tokens up
to the common prefix are reused and the rest is evaluated; a prompt that matches whole
still evaluates its last token. The slot then holds this prompt. There is no TTL: a
prompt stays until another request takes its slot.

[inferred] The slot keeps the prompt only: the tokens the model generated are not
matched (the chat template renders an answer back into the next prompt in its own way:
reasoning dropped, tool calls re-serialized), so the answer is evaluated once, when the
next prompt first holds it. `n_cache_reuse` (KV shifting after a mid-prompt change) is
off by default and not modelled.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from stoker.cache.accounting._openai_render import Rendered
from stoker.cache.accounting.implicit import ChatCall, StreamAccountant, common_prefix
from stoker.cache.accounting.outcome import CacheBreakpoint, CacheOutcome, MissFact, outcome
from stoker.errors import ConfigError, InvalidRequest
from stoker.wire.dialects._chain import DEFAULT_CAPACITY, ChainMemo
from stoker.wire.usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotSettings:
    """The server's flags: `slots` (`--parallel`; current builds default to 4 with a
    unified KV cache [assumed]), `similarity` (`--slot-prompt-similarity`), and the
    prefill and decode speeds its `timings` report (the time a cached token saves)."""

    slots: int = 4
    similarity: float = 0.10
    prefill_per_second: float = 1000.0
    decode_per_second: float = 50.0
    memo_capacity: int = DEFAULT_CAPACITY

    def __post_init__(self) -> None:
        if self.slots < 1 or not 0 <= self.similarity <= 1:
            raise ConfigError("slots must be at least 1 and similarity within [0, 1]")
        if self.prefill_per_second <= 0 or self.decode_per_second <= 0:
            raise ConfigError("prefill and decode speeds must be positive")


@dataclass(slots=True)
class _Slot:
    prompt: Rendered | None = None
    last_used: float = float("-inf")


@dataclass(slots=True)
class _Server:
    slots: list[_Slot]
    renders: ChainMemo = field(default_factory=ChainMemo)
    # Prompts another request took the slot of: to explain a miss, never to read.
    evicted: deque[Rendered] = field(default_factory=lambda: deque(maxlen=16))


class SlotAccountant(StreamAccountant[SlotSettings, _Server]):
    """Slots per workspace (one server each) and llama-server's reuse over them."""

    __slots__ = ()

    def __init__(self, settings: SlotSettings | None = None) -> None:
        super().__init__(settings or SlotSettings())

    def _open(self) -> _Server:
        s = self._settings
        return _Server(slots=[_Slot() for _ in range(s.slots)], renders=ChainMemo(s.memo_capacity))

    def _reuse(self, call: ChatCall, server: _Server) -> CacheOutcome:
        """The tokens a request reuses from its slot, and the slot it takes."""
        r, payload = call.r, call.payload
        slot, shared = self._choose(server, r, payload.get("id_slot"))
        reused = 0 if payload.get("cache_prompt", True) is False else min(shared, r.total - 1)
        misses: list[MissFact] = []
        lost = max((common_prefix(r, old) for old in server.evicted), default=0)
        if min(lost, r.total - 1) > reused:  # it was cached, in a slot taken since
            misses.append(MissFact(cause="evicted", tokens=lost))
        if slot.prompt is not None and common_prefix(r, slot.prompt) < slot.prompt.total:
            server.evicted.append(slot.prompt)
        slot.prompt, slot.last_used = r, call.at
        usage = Usage(uncached=r.total - reused, read=reused)
        return outcome(
            usage,
            blocks=len(r.segments),
            breakpoints=(CacheBreakpoint(index=len(r.segments) - 1, ttl="slot", tokens=r.total),),
            hit_index=r.segment_at(reused) if reused else None,
            misses=misses,
        )

    def _choose(self, server: _Server, r: Rendered, wanted: Any) -> tuple[_Slot, int]:
        """The slot a request goes to, and the prefix it shares with that slot's prompt."""
        slots = server.slots
        if wanted is not None and wanted != -1:
            if (
                isinstance(wanted, bool)
                or not isinstance(wanted, int)
                or not 0 <= wanted < len(slots)
            ):
                raise InvalidRequest(
                    f"id_slot: there is no slot {wanted!r} (this server has {len(slots)})",
                    provider="llama.cpp",
                    param="id_slot",
                )
            slot = slots[wanted]
            return slot, common_prefix(r, slot.prompt) if slot.prompt is not None else 0
        best: tuple[int, _Slot] | None = None
        for slot in slots:
            if slot.prompt is None:
                continue
            shared = common_prefix(r, slot.prompt)
            if shared > (best[0] if best else 0) and shared / r.total > self._settings.similarity:
                best = (shared, slot)
        if best is not None:
            return best[1], best[0]
        lru = min(slots, key=lambda s: s.last_used)
        return lru, common_prefix(r, lru.prompt) if lru.prompt is not None else 0
