"""The cache record of one provider call, and the explanation of its cache effect.

Records are values so the store can persist them without knowing how they were made
(`stoker.cache.record` makes them; `stoker.cache.explain` writes the explanation).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from stoker.wire.fingerprint import SlotFingerprints
from stoker.wire.request import Breakpoint
from stoker.wire.usage import Usage

Verdict = Literal[
    "first",  # first call of a session: nothing to read yet
    "hit",  # read what was expected
    "declared",  # a deliberate prefix change (rebase, model switch) recorded with a reason
    "diverged",  # a byte moved before the end of the previous request: a cache break
    "expired",  # nothing moved, but the entry's TTL ran out
    "lookback",  # nothing moved, but the previous write was out of the 20-position window
    "below_minimum",  # the prefix is shorter than the model's minimum cacheable length
    "no_breakpoint",  # the request asked for no caching (no cache_control marker anywhere)
    "concurrent",  # the entry was written by a request whose response had not started yet
    "evicted",  # nothing moved; the provider dropped the entry early
    "cold",  # nothing moved, but the provider holds no entry for this prefix at all
    "overflow",  # nothing moved; too many requests per minute on one route: another machine
    "rerouted",  # nothing moved; a router (OpenRouter) sent it to an upstream without the cache
    "kept_warm",  # a keep-warm request (ping or seal) the time policy sent
    "unexplained",  # read less than expected and no reason was found
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """Why a call read what it read. `slot` names the first diverging place, e.g.
    `tools[3].input_schema.properties.path.description` or `messages[12].content[1]`."""

    verdict: Verdict
    detail: str = ""
    slot: str | None = None
    offset: int | None = None
    classification: str | None = None

    @property
    def is_break(self) -> bool:
        return self.verdict == "diverged"

    def __str__(self) -> str:
        where = f" at {self.slot}" if self.slot else ""
        if self.offset is not None:
            where += f" (byte {self.offset})"
        cls = f" [{self.classification}]" if self.classification else ""
        return (
            f"{self.verdict}{where}{cls}: {self.detail}"
            if self.detail
            else f"{self.verdict}{where}{cls}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _EXPLANATION}  # flat: no copies

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Explanation:
        data = dict(data)
        if "kind" in data:  # written before the field was named `verdict`
            data["verdict"] = data.pop("kind")
        return cls(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheRecord:
    """What one provider call sent (as fingerprints), what it cost, and why."""

    session_id: str
    seq: int
    role: str  # the session's: "main", "fork", "review", "subagent", "branch"
    provider: str
    model: str
    started_at: float
    fingerprints: SlotFingerprints
    breakpoints: tuple[Breakpoint, ...]
    usage: Usage
    cost_usd: float | None
    retries: int = 0
    declared_break: str | None = None
    explanation: Explanation = field(default_factory=lambda: Explanation(verdict="first"))
    purpose: str = "turn"  # "turn"; a keep-warm: "ping", "seal"; a cache_create/_extend/_delete
    fallback_of: str | None = None  # the primary model, when a fallback route served this
    # Explicit cache objects (Gemini's cachedContents): the storage a lifecycle call
    # ("cache_create", "cache_extend", "cache_delete") bought or gave back, in token-hours
    # (its cost is in `cost_usd`), and the tokens a call read from a cache it named.
    storage_token_hours: float = 0.0
    cache_read: int = 0
    idle_before: float | None = None  # a turn's first call: seconds idle since the last turn

    def to_dict(self) -> dict[str, Any]:
        """Every field in order, the nested values in their JSON form; the newest fields
        only when set, so a record that does not use them reads as it always did."""
        out = {name: getattr(self, name) for name in _RECORD}
        out.update(
            fingerprints=self.fingerprints.to_dict(),
            breakpoints=[
                {name: getattr(b, name) for name in _BREAKPOINT} for b in self.breakpoints
            ],
            usage=self.usage.to_dict(),
            explanation=self.explanation.to_dict(),
        )
        for name in ("fallback_of", "idle_before"):  # an idle gap of 0 s stays: it was seen
            if out[name] is None:
                del out[name]
        for name in ("storage_token_hours", "cache_read"):
            if not out[name]:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheRecord:
        return cls(
            # records written before the renames said "lineage" and "kind"
            session_id=data["session_id"] if "session_id" in data else data["lineage"],
            seq=data["seq"],
            role=data["role"] if "role" in data else data["kind"],
            provider=data["provider"],
            model=data["model"],
            started_at=data["started_at"],
            fingerprints=SlotFingerprints.from_dict(data["fingerprints"]),
            breakpoints=tuple(Breakpoint(**b) for b in data["breakpoints"]),
            usage=Usage.from_dict(data["usage"]),
            cost_usd=data["cost_usd"],
            retries=data.get("retries", 0),
            declared_break=data.get("declared_break"),
            explanation=Explanation.from_dict(data["explanation"]),
            purpose=data.get("purpose", "turn"),
            fallback_of=data.get("fallback_of"),
            storage_token_hours=float(data.get("storage_token_hours", 0.0)),
            cache_read=int(data.get("cache_read", 0)),
            idle_before=data.get("idle_before"),
        )


# Each class's field names, in order: `fields()` and `asdict` are slow to ask on every
# record (asdict also deep-copies every value), and these classes hold plain values.
_EXPLANATION = tuple(f.name for f in fields(Explanation))
_BREAKPOINT = tuple(f.name for f in fields(Breakpoint))
_RECORD = tuple(f.name for f in fields(CacheRecord))
