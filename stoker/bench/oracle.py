"""The floor of every online keep-warm policy on a known distribution of return times:
the Bayes-optimal decision at each refresh point (`stoker bench cache --workload
foresight` prints it beside the time policy's figures).

Foresight (`stoker.cache.foresight.optimum`) knows when the user comes back; no online
policy does, so the gap between the two mixes what the time policy could still learn
with what nobody can know. This module measures the second part: a policy told the true
distribution the bench draws gaps from (a mixture of log-uniform kinds,
`stoker.bench.returns`), not the gaps themselves, that picks at each refresh point the
move of least expected cost given that the user has been away so far. Its moves and
prices are foresight's (let the entry expire, ping it, seal it under the long TTL, read a
long entry again), and it is asked where `foresight.replay` asks every online policy: at
a refresh point when the user is still away at the entry's expiry. Its expected cost is
a dynamic programme over the points (each gap's points form a tree: pings along the
short TTL, a seal branching off to the long one), so the figure is exact, not searched
to a depth. It keeps no cap: it is the least any online policy can expect to pay, not a
policy anyone should run without knowing the distribution.

Explicit caches (Gemini's `store`, priced by the hour until the return) are not among its
moves: on such a tariff it is not a floor, and `oracle` refuses one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from stoker.cache.foresight import (
    Chooser,
    Gap,
    Move,
    Point,
    Tariff,
    move_cost,
    moves_at,
    rewrite,
    start,
    step,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogUniformMixture:
    """A distribution of gaps: each part (weight, low, high) draws a gap log-uniform
    between its bounds in seconds, as `stoker.bench.returns.gaps_of` does."""

    parts: tuple[tuple[float, float, float], ...]

    @classmethod
    def of(
        cls, weights: Mapping[str, float], kinds: Mapping[str, tuple[float, float]]
    ) -> LogUniformMixture:
        total = sum(weights.values())
        return cls(parts=tuple((w / total, *kinds[k]) for k, w in sorted(weights.items()) if w))

    def survival(self, x: float) -> float:
        """P(a gap lasts longer than `x` seconds)."""
        out = 0.0
        for weight, low, high in self.parts:
            if x < low:
                out += weight
            elif x < high:
                out += weight * math.log(high / x) / math.log(high / low)
        return out

    def quantile_cells(self, n: int) -> list[tuple[float, float, float]]:
        """Each part cut into `n` cells of equal probability: (weight, low, high) each,
        for sums that bound an expectation over the distribution from both sides."""
        out = []
        for weight, low, high in self.parts:
            edges = [low * (high / low) ** (i / n) for i in range(n + 1)]
            out += [(weight / n, a, b) for a, b in itertools.pairwise(edges)]
        return out


Values = Callable[[Point], tuple[float, Move]]


def _values(gap: Gap, t: Tariff, dist: LogUniformMixture) -> Values:
    """The expected cost of `gap` from each of its refresh points (the user away at that
    point's expiry) under the best move there, and that move; memoised per point."""
    lost = rewrite(gap, t)
    saved = (t.write_short - t.read) * gap.tail
    memo: dict[tuple[float, bool, bool], tuple[float, Move]] = {}

    def value(point: Point) -> tuple[float, Move]:
        key = (point.at, point.long_lived, point.tail_written)
        if key in memo:
            return memo[key]
        away = dist.survival(point.expires)
        best: tuple[float, Move] = (lost, "expire")  # the return rewrites, surely
        for move in moves_at(gap, t, point):
            if away <= 0 or move not in ("ping", "seal"):
                continue
            after = step(move, gap, t, point)
            still = dist.survival(after.expires) / away
            later = value(after)[0] if still > 0 else 0.0
            cost = move_cost(move, gap, t, point) - (1 - still) * saved + still * later
            if cost < best[0]:
                best = (cost, move)
        memo[key] = best
        return best

    return value


def oracle(dist: LogUniformMixture, t: Tariff) -> Chooser:
    """The Bayes-optimal online policy under `dist` as a chooser: at each point the move
    of least expected cost. It reads a gap's prefix and tail, never when it ends."""
    if t.storage is not None:
        raise ValueError("the oracle's moves leave explicit caches out: no floor on this tariff")
    tables: dict[tuple[int, int, int, bool], Values] = {}

    def choose(gap: Gap, point: Point) -> Move:
        key = (gap.cached, gap.tail, gap.overhead, gap.long_lived)
        if key not in tables:
            tables[key] = _values(gap, t, dist)
        return tables[key](point)[1]

    return choose


def expected_oracle(gap: Gap, t: Tariff, dist: LogUniformMixture) -> float:
    """What the oracle expects `gap` (its prefix and tail; not its length) to cost: zero
    when the user is back before the entry first expires, else its best from there."""
    first = start(gap, t)
    return dist.survival(first.expires) * _values(gap, t, dist)(first)[0]


def expected_online(gap: Gap, t: Tariff, dist: LogUniformMixture, choose: Chooser) -> float:
    """What any online `choose` expects `gap` to cost under `dist`, exactly: walking its
    refresh points once, each return between two expiries priced as `replay` prices it.
    `choose` is shown the gap with no end (`seconds` infinite), as online it is."""
    unknown = replace(gap, seconds=math.inf, held=None)
    saved = (t.write_short - t.read) * gap.tail
    point = start(gap, t)
    total = 0.0
    while (away := dist.survival(point.expires)) > 0:
        move = choose(unknown, point)
        if move not in moves_at(gap, t, point) or move not in ("ping", "seal"):
            return total + away * (point.spent + rewrite(gap, t))
        after = step(move, gap, t, point)
        total += (away - dist.survival(after.expires)) * (after.spent - saved)
        point = after
    return total
