"""Cost of a call from its usage buckets and the model's price (`stoker.cache.prices`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stoker.cache.models import ModelInfo
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage


def cost_usd(usage: Usage, info: ModelInfo) -> float | None:
    """USD cost of `usage` on `info`'s model; None when nobody prices it."""
    return None if info.price is None else info.price.cost(usage)


def uncached_cost_usd(usage: Usage, info: ModelInfo) -> float | None:
    """What the same tokens would have cost with no cache at all (the baseline for savings)."""
    return None if info.price is None else info.price.uncached_cost(usage)


def input_units(usage: Usage, info: ModelInfo) -> float:
    """The input of `usage` in base-input tokens: what the time policy and the benches
    count, since a price in dollars is not known for every model."""
    return (
        usage.uncached
        + info.write_5m * usage.written_5m
        + info.write_1h * usage.written_1h
        + info.read * usage.read
    )


def total_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of several costs; unknown (None) if any one of them is unknown."""
    total = 0.0
    for c in costs:
        if c is None:
            return None
        total += c
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class CostTotal:
    """A sum that one unpriced call cannot hide: the known costs added up, and how many
    calls had no price (shown beside the figure, never instead of it)."""

    usd: float = 0.0
    priced: int = 0
    unpriced: int = 0

    def __str__(self) -> str:
        text = f"${self.usd:.5f}"
        if self.unpriced:
            text += f" (+{self.unpriced} call{'s' if self.unpriced > 1 else ''} with no price)"
        return text


def sum_costs(costs: Iterable[float | None]) -> CostTotal:
    """Every known cost added up; unknown ones counted."""
    usd, priced, unpriced = 0.0, 0, 0
    for c in costs:
        if c is None:
            unpriced += 1
        else:
            usd += c
            priced += 1
    return CostTotal(usd=usd, priced=priced, unpriced=unpriced)


class RecordTotals:
    """`usage` and `cost_usd` summed over a value's `records` (a turn as `send` returns
    it, a turn as a view shows it)."""

    __slots__ = ()
    records: Sequence[CacheRecord]

    @property
    def usage(self) -> Usage:
        return Usage.total(r.usage for r in self.records)

    @property
    def cost_usd(self) -> float | None:
        return total_cost(r.cost_usd for r in self.records)
