"""Cost of a call from its usage buckets and the model's price table (data, not code)."""

from __future__ import annotations

from collections.abc import Iterable

from stoker.cache.models import ModelInfo
from stoker.wire.usage import Usage


def cost_usd(usage: Usage, info: ModelInfo) -> float | None:
    """USD cost of `usage` on `info`'s model; None when the table has no price for it."""
    if info.input is None or info.output is None:
        return None
    input_units = (
        usage.uncached
        + info.write_5m * usage.written_5m
        + info.write_1h * usage.written_1h
        + info.read * usage.read
    )
    return (input_units * info.input + usage.output * info.output) / 1_000_000


def uncached_cost_usd(usage: Usage, info: ModelInfo) -> float | None:
    """What the same tokens would have cost with no cache at all (the baseline for savings)."""
    if info.input is None or info.output is None:
        return None
    return (usage.input_total * info.input + usage.output * info.output) / 1_000_000


def total_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of several costs; unknown (None) if any one of them is unknown."""
    total = 0.0
    for c in costs:
        if c is None:
            return None
        total += c
    return total
