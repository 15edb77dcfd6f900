"""Token usage in disjoint buckets, normalized once from each provider's fields.

The buckets never overlap: `input_total = uncached + written_5m + written_1h + read`.
Anthropic's 5-minute and 1-hour writes map directly; OpenAI's short (30 min) and long
(12 h) writes use the same two buckets, which the price table bills per provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """One call's tokens: what was read from cache, written to it, or neither."""

    uncached: int = 0
    written_5m: int = 0
    written_1h: int = 0
    read: int = 0
    output: int = 0

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h

    @property
    def input_total(self) -> int:
        return self.uncached + self.written + self.read

    @property
    def hit_ratio(self) -> float:
        """Share of input tokens served from cache (0.0 when there was no input)."""
        total = self.input_total
        return self.read / total if total else 0.0

    def __add__(self, other: Usage) -> Usage:
        # Spelled out: a turn adds usages several times, and `fields()` is slow.
        return Usage(
            uncached=self.uncached + other.uncached,
            written_5m=self.written_5m + other.written_5m,
            written_1h=self.written_1h + other.written_1h,
            read=self.read + other.read,
            output=self.output + other.output,
        )

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        return sum(usages, cls())

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _NAMES}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(**{name: int(data.get(name, 0)) for name in _NAMES})


_NAMES = tuple(f.name for f in fields(Usage))  # in order; `fields()` is slow to ask each time
