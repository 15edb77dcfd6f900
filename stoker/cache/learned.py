"""The keep-warm decision the time policy makes at each refresh point: the move with the
least expected cost under the return times this agent's (or user's) sessions have shown,
or, where they have shown too little, a rent-or-buy rule with a worst-case bound.

*Learned.* The gaps seen so far (this session's, its user's, the stored sessions' the
caller adds) are an empirical distribution of when people come back, and a gap that has
lasted `at` seconds is judged by the gaps that lasted longer. From it, a short search
over the next refresh points weighs each move (`stoker.cache.foresight`'s moves and
prices): let the entry expire (the rewrite, times the chance the user comes back at all),
or ping or seal now (their cost, less the tail they write ahead of a return within their
lifetime, plus what is best at the next point if the user is still away then). Returns
follow patterns (a reply within a minute, a coffee break, the next morning), so a policy
that knows them crosses a gap the way foresight would, most of the time. It too never
spends more on one gap than the rewrite it saves, and the search plans within that cap:
a keep-warm that pays off only past it (reads of a long entry until the next morning)
is not weighed as if it could be followed to the end.

*Rent or buy.* With fewer than `MIN_SEEN` gaps seen, or fewer than `MIN_LONGER` that
lasted longer than this one has, the estimate says nothing, and the decision must not
be far from foresight whatever happens: keep the entry along the cheapest cover (a seal
first where one is offered, then reads of the long entry; pings where there is one TTL)
while what the gap spent stays under the rewrite it saves, then let it go. Paying a
rewrite after spending one at most costs twice what foresight pays (the deterministic
ski-rental bound; a seal's premium over a ping is allowed only while it is under a
ping's price, which keeps the first window within 2x too).

*Guarded.* The learned move is the cheapest in expectation, not in the worst case: let
an entry go at once because past users came back the next morning, and this one is
back a minute later, and the gap cost a rewrite where foresight paid one ping. So a
learned move that departs from rent-or-buy is taken only while the session's
robustness account (`stoker.cache.robust`: twice what foresight paid across its
finished gaps, less what the policy paid) can absorb its worst case, a return just
after any expiry from here on with rent-or-buy deciding after it; otherwise the
cheapest move in expectation that it can absorb, rent-or-buy's at least. The session's
gaps then cost at most twice foresight's whatever the returns (plus, as rent-or-buy's
own bound, the rewrite of a tail a keep-warm wrote before the entry was let go). A new
session has nothing in its account: its first costly gaps are crossed within twice
foresight, and each gap crossed for less builds the room the next learned risk uses.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from stoker.cache import robust
from stoker.cache.foresight import Gap, Move, Point, Tariff, move_cost, moves_at, rewrite, step

MIN_SEEN = 6
"""Gaps seen before the estimate is trusted at all."""
MIN_LONGER = 3
"""Gaps longer than the current one's age before the estimate decides at that age."""
LOOKAHEAD = 14
"""Refresh points the search looks ahead (about an hour of pings, or 14 hours sealed);
past them, the entry is let go if the user is still away."""

PRIOR_WEIGHT = 2.0
"""How many observed gaps the scale-free prior is worth."""

Basis = Literal["learned", "rent-or-buy", "guarded"]


@dataclass(frozen=True, slots=True)
class ReturnTimes:
    """An empirical distribution of idle gaps: `ended` sorted (seconds, each at most the
    `horizon`), `never` how many did not end within it (a user who did not come back),
    and a scale-free prior worth `weight` gaps (the longer someone has been away, the
    longer they are likely to stay: back within h after e is h / (e + h)), so that the
    few gaps longer than an old one do not rule a return out."""

    ended: tuple[float, ...]
    never: int
    horizon: float
    weight: float = PRIOR_WEIGHT

    @classmethod
    def of(cls, gaps: Sequence[float], *, horizon: float) -> ReturnTimes:
        ended = tuple(sorted(g for g in gaps if g <= horizon))
        return cls(ended=ended, never=len(gaps) - len(ended), horizon=horizon)

    @property
    def seen(self) -> int:
        return len(self.ended) + self.never

    def longer(self, at: float) -> int:
        """Gaps that lasted longer than `at` (the never-ended ones included)."""
        return len(self.ended) - bisect.bisect_right(self.ended, at) + self.never

    def back(self, at: float, until: float = math.inf) -> float:
        """P(the user is back in (at, until] | still away at `at`), within the horizon."""
        until = min(until, self.horizon)
        if until <= at:
            return 0.0
        prior = (until - at) / until
        within = bisect.bisect_right(self.ended, until) - bisect.bisect_right(self.ended, at)
        return (within + self.weight * prior) / (self.longer(at) + self.weight)

    def thin(self, at: float) -> bool:
        return self.seen < MIN_SEEN or self.longer(at) < MIN_LONGER


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """A move and what was expected of it: the chance the user is back while the entry
    it keeps lives, its cost now, and the expected cost of the gap from here if it is
    made (`keep`) or if the entry is let go (`expire`); a guarded move is the cheapest
    in expectation of those the session's robustness account allows."""

    move: Move
    basis: Basis
    chance: float
    cost: float
    keep: float
    expire: float
    seen: int
    instead: Move | None = None  # the move of least expected cost, where the robustness
    # account ruled it out (`basis == "guarded"`)


def _saving(gap: Gap, t: Tariff) -> float:
    """What a return saves when a keep-warm wrote the tail ahead of it."""
    return (t.write_short - t.read) * gap.tail


def _cover(gap: Gap, t: Tariff, point: Point, budget: float) -> Move:
    """The cheapest cover from `point` within `budget`: a seal where the long TTL is
    offered, its premium over a ping is under a ping's price and it fits, else a ping."""
    ping = move_cost("ping", gap, t, point)
    if "seal" in moves_at(gap, t, point):
        seal = move_cost("seal", gap, t, point)
        if seal <= 2 * ping and seal <= budget:
            return "seal"
    return "ping"


def rent_or_buy(gap: Gap, t: Tariff, point: Point, *, scale: float = 1.0) -> Choice:
    """Keep the entry along the cheapest cover while the gap's spend stays within the
    rewrite it saves (`scale`: the share of that rewrite counted on)."""
    lost = scale * rewrite(gap, t)
    move = _cover(gap, t, point, lost - point.spent)
    cost = move_cost(move, gap, t, point)
    keep = point.spent + cost <= lost
    return Choice(
        move=move if keep else "expire",
        basis="rent-or-buy",
        chance=1.0 if keep else 0.0,
        cost=cost if keep else 0.0,
        keep=cost,
        expire=lost,
        seen=0,
    )


def _options(
    gap: Gap, t: Tariff, est: ReturnTimes, point: Point, lost: float, depth: int
) -> list[tuple[float, Move, float]]:
    """Each move at `point` (the user away until then) with the expected cost of the gap
    from there if it is made, and its chance of a return while the entry it keeps lives;
    letting go first. Only moves the cap allows (the gap's spend within the rewrite it
    saves, `lost`): a plan that keeps the entry past the cap is not one the policy can
    follow, and counting on it kept entries warm for a return the cap then gave up on."""
    out: list[tuple[float, Move, float]] = [(est.back(point.at) * lost, "expire", 0.0)]
    if depth >= LOOKAHEAD or out[0][0] <= 0:
        return out
    saved = _saving(gap, t)
    for move in moves_at(gap, t, point):
        cost = move_cost(move, gap, t, point)
        if move not in ("ping", "seal") or point.spent + cost > lost:
            continue
        after = step(move, gap, t, point)
        chance = est.back(point.at, after.expires)
        away = 1.0 - est.back(point.at, after.at)
        later = _value(gap, t, est, after, lost, depth + 1) if away > 0 else 0.0
        out.append((cost - chance * saved + away * later, move, chance))
    return out


def _value(gap: Gap, t: Tariff, est: ReturnTimes, point: Point, lost: float, depth: int) -> float:
    return min(v for v, _, _ in _options(gap, t, est, point, lost, depth))


def choose(
    gap: Gap,
    t: Tariff,
    point: Point,
    gaps: Sequence[float],
    *,
    horizon: float,
    scale: float = 1.0,
    slack: float = 0.0,
) -> Choice:
    """The move at `point` (the user away since the gap began, `point.at` seconds ago):
    the least expected cost under `gaps`, or rent-or-buy where they are too few, or where
    the learned move's worst case is more than the session's `slack` can absorb
    (`stoker.cache.robust`: its gaps then cost at most twice foresight's)."""
    est = ReturnTimes.of(gaps, horizon=horizon)
    fallback = rent_or_buy(gap, t, point, scale=scale)
    if est.thin(point.at):
        return fallback
    lost = scale * rewrite(gap, t)
    options = _options(gap, t, est, point, lost, 0)  # never past the rewrite it saves
    ranked = sorted(options, key=lambda o: o[0])  # letting go first among equals

    def then(p: Point) -> Move:
        return rent_or_buy(gap, t, p, scale=scale).move

    def allowed(move: Move) -> bool:
        return move == fallback.move or robust.safe(
            gap, t, point, move, then, lost=lost, slack=slack
        )

    move = next((m for _, m, _ in ranked if allowed(m)), fallback.move)
    basis: Basis = "learned" if move == ranked[0][1] else "guarded"
    if move not in (m for _, m, _ in options):  # rent-or-buy's cover, past the estimate
        return replace(fallback, basis=basis, seen=est.seen, instead=ranked[0][1])
    # what keeping it would cost and its chance, whichever way it went (infinite: the
    # cap allows no more keep-warm in this gap)
    keeps = [o for o in options[1:] if o[1] == move] or options[1:]
    keep, kept, chance = min(keeps, key=lambda o: o[0], default=(math.inf, "ping", 0.0))
    return Choice(
        move=move,
        basis=basis,
        chance=chance,
        cost=move_cost(kept, gap, t, point) if move != "expire" else 0.0,
        keep=keep,
        expire=options[0][0],
        seen=est.seen,
        instead=ranked[0][1],
    )
