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
return plus the slack. The policy takes the cheapest move in expectation that is safe
(rent-or-buy's always is). Then every gap starts with a safe way across it (rent-or-buy,
the ski-rental bound), every move keeps one, and each finished gap leaves the slack at
or above zero: the session's gaps never cost more than twice foresight's, whatever the
returns, beyond rent-or-buy's own term (after a keep-warm wrote the tail, the time
policy counts its rewrite as lost too; foresight does not). A gap is checked at the
moments where the cost of a return jumps, just after each expiry of the entry along the
path; foresight's cost only grows with the return time, so those are the worst.

The account (`Account`) is settled from a session's records as `stoker report` reads
them (`stoker.cache.hindsight`): `settled` for a session that keeps them all, `carried`
for a proxy lineage that keeps only those since its latest turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from stoker.cache.foresight import Gap, Move, Point, Tariff, optimum, step, tariff
from stoker.cache.hindsight import reviews
from stoker.cache.models import ModelInfo
from stoker.wire.record import CacheRecord

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Account:
    """A session's robustness account: its `slack` (base-input tokens) and how many of
    its records it has settled (`upto`: the gaps before the turn call at `upto - 1`)."""

    slack: float = 0.0
    upto: int = 0


def settled(
    account: Account, records: Sequence[CacheRecord], info: ModelInfo, *, margin: float = 30.0
) -> Account:
    """`account` with every gap `records` (one session's, in order) shows past it settled:
    what was paid across each and what foresight would have, as `stoker report` reads
    them (`stoker.cache.hindsight`)."""
    turns = [i for i in range(account.upto, len(records)) if records[i].purpose == "turn"]
    if not turns or (account.upto == 0 and len(turns) < 2):
        return account
    start = max(account.upto - 1, 0)
    window, menu = records[start : turns[-1] + 1], tariff(info, margin=margin)
    if _untouched(window, menu):
        return Account(slack=account.slack, upto=turns[-1] + 1)
    gaps = reviews(window, menu, info)
    slack = account.slack
    for gap in gaps:
        slack = settle(slack, paid=gap.paid, best=gap.best.cost)
    return Account(slack=slack, upto=turns[-1] + 1)


def _untouched(window: Sequence[CacheRecord], menu: Tariff) -> bool:
    """Whether `window` is one turn call after another within the entry's shortest
    lifetime, the second reading all the first left cached: a gap no keep-warm touched,
    that cost nothing and that foresight crosses for nothing, so settling it leaves the
    slack as it is. Back-to-back turns are most calls; this spares each the review."""
    if len(window) != 2:
        return False
    last, call = window
    return (
        last.purpose == call.purpose == "turn"
        and last.started_at <= call.started_at <= last.started_at + menu.short
        and call.explanation.verdict == "hit"
        and call.usage.read >= last.usage.read + last.usage.written
        and not call.storage_token_hours
    )


def carried(
    account: Account, since: tuple[CacheRecord, ...], record: CacheRecord, info: ModelInfo
) -> tuple[Account, tuple[CacheRecord, ...]]:
    """For a caller that keeps only the records since its last turn call (`since`: the
    proxy's lineages), the account and those records after `record`."""
    if record.purpose != "turn":
        return account, (*since, record)
    if since:
        account = settled(replace(account, upto=1), (*since, record), info)
    return account, (record,)
