"""The robustness account that keeps the learned keep-warm within twice foresight.

The learned move (`stoker.cache.learned`) is the cheapest in expectation, and can be far
from foresight on a sequence that defies the history: it lets an entry expire because
past users came back late, and this one is back a minute later (a rewrite where
foresight paid one ping). Rent-or-buy never pays more than twice foresight across a gap
whatever the return; this module lets the learned move depart from it only where the
departure's worst case is paid for.

A session's *slack* is what its finished gaps left under the bound: twice what foresight
would have paid across them, less what the policy paid (both known once a gap ends). A
move at a refresh point is *safe* if, whatever the return time from here on, the gap's
cost under it, followed by rent-or-buy, stays within twice foresight's cost of that
return plus the slack. The policy takes the learned move when it is safe, else
rent-or-buy's. Then every gap starts with a safe way across it (rent-or-buy, the
ski-rental bound), every move keeps one, and each finished gap leaves the slack at or
above zero: the session's gaps never cost more than twice foresight's, whatever the
returns. A gap is checked at the moments where the cost of a return jumps, just after
each expiry of the entry along the path; foresight's cost only grows with the return
time, so those are the worst.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

from stoker.cache.foresight import Gap, Move, Point, Tariff, optimum, step

BOUND = 2.0
"""The competitive ratio the account keeps: the policy's gaps cost at most this many
times foresight's."""
STEPS = 256
"""Refresh points a path is followed before it is counted as let go."""
_AFTER = 1e-6  # seconds past an expiry: the first return the expiry makes a rewrite

Fallback = Callable[[Point], Move]
"""The rule that decides every refresh point after the move checked (rent-or-buy)."""


@lru_cache(maxsize=4096)
def _foresight(gap: Gap, t: Tariff) -> float:
    return optimum(gap, t).cost


def foresight_cost(gap: Gap, t: Tariff, seconds: float, lost: float) -> float:
    """What foresight pays across `gap` if the user is back after `seconds`, an expiry
    counted as `lost` (at most the rewrite: the share of it the policy counts on)."""
    return min(_foresight(replace(gap, seconds=seconds), t), lost)


def _returned(gap: Gap, t: Tariff, point: Point) -> float:
    saved = (t.write_short - t.read) * gap.tail if point.tail_written else 0.0
    return point.spent - saved


def excess(
    gap: Gap,
    t: Tariff,
    point: Point,
    move: Move,
    fallback: Fallback,
    *,
    lost: float,
) -> float:
    """The most the gap's cost can exceed `BOUND` times foresight's if `move` is made at
    `point` (the user still away) and `fallback` decides every refresh point after it."""
    worst = -math.inf
    for _ in range(STEPS):
        if move not in ("ping", "seal"):  # let go: a return after the expiry rewrites
            paid = point.spent + lost
            return max(worst, paid - BOUND * foresight_cost(gap, t, point.expires + _AFTER, lost))
        after = step(move, gap, t, point)
        paid = _returned(gap, t, after)
        # a return just after the entry would have expired, now kept by the move
        worst = max(worst, paid - BOUND * foresight_cost(gap, t, point.expires + _AFTER, lost))
        point, move = after, fallback(after)
    let_go = point.spent + lost
    return max(worst, let_go - BOUND * foresight_cost(gap, t, point.expires + _AFTER, lost))


def safe(
    gap: Gap, t: Tariff, point: Point, move: Move, fallback: Fallback, *, lost: float, slack: float
) -> bool:
    """Whether `move` at `point` keeps the gap's worst case within the session's slack."""
    return (
        excess(gap, t, point, move, fallback, lost=lost) <= slack + 1e-9 * lost
    )  # within rounding


def settle(slack: float, *, paid: float, best: float) -> float:
    """The slack after a gap the policy crossed for `paid` and foresight for `best`."""
    return slack + BOUND * best - paid
