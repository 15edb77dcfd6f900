"""The offline optimum of keep-warm: what crossing each idle gap would have cost with
perfect foresight, and what any online policy pays in the same terms.

The time policy (`stoker.cache.time_policy`) decides before an entry expires without
knowing when the user comes back. Measured against the ideal writes alone, every ping
and seal looks like waste, even when it was the cheapest thing to do; the honest anchor
is the cheapest schedule anyone could have chosen knowing every return time. This module
computes it, per gap, as a search over the gap's refresh points (each a margin before the
live entry expires): let the entry expire (the next call rewrites it), *ping* it (read
it, write the tail once at short-TTL prices, live another short TTL), *seal* it (write
the tail under the long TTL: the whole prefix lives the long TTL), keep a long entry by
reading it, *store* it in an explicit cache billed per token-hour (Gemini's
`cachedContents`) until the return, or *extend* an explicit cache already held.

Gaps are independent: the call that ends a gap reads (or rewrites) the entry and writes
its own new tail under the planner's TTL, so the next gap starts from what the record
says, whatever the previous gap did. The session's optimum is the sum of its gaps'.

Costs are in base-input tokens (a token at the model's plain input price) and relative to
a warm return: a gap costs what keep-warm spent in it plus what the next call paid over
reading everything cached (a rewrite of the prefix after an expiry, minus the tail a
keep-warm wrote ahead of it). `replay` runs any online policy through the same
arithmetic, so the ratio of the two is the policy's competitive ratio on that sequence.
Pure and fast: a gap's search stops a branch once it has spent more than a rewrite.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from stoker.cache.models import ModelInfo

Move = Literal["expire", "ping", "seal", "store", "extend"]

LONG_OPENAI = 12 * 3600.0  # GPT-5.6+'s "12h" lifetime
SHORT_OPENAI = 30 * 60.0  # GPT-5.6+'s 30 minutes after the latest use
IN_MEMORY = 10 * 60.0  # older OpenAI models without 24h retention: 5 to 10 idle minutes
RETAINED = 24 * 3600.0  # `prompt_cache_retention: "24h"`


@dataclass(frozen=True, slots=True, kw_only=True)
class Tariff:
    """What a gap can buy, per token, in base-input tokens: the short and long lifetimes
    (equal where there is one), the prices of reading and of writing under each, and for
    explicit caches their creation price and storage per token-hour."""

    short: float
    long: float
    read: float
    write_short: float
    write_long: float
    storage: float | None = None
    create: float = 1.0
    margin: float = 30.0


def tariff(info: ModelInfo, *, margin: float = 30.0) -> Tariff:
    """The gap menu of `info`'s model: Anthropic's 5-minute and 1-hour TTLs, OpenAI's
    retention (30 minutes or 12 hours on GPT-5.6+; 24 hours with `retention_24h`, else
    in-memory minutes, before), an implicit entry a read renews (Gemini's, DeepSeek's),
    and Gemini's storage-priced explicit caches."""
    storage = info.storage / info.input if info.storage is not None and info.input else None
    if info.ttls:
        seconds = {"5m": 300.0, "1h": 3600.0}
        short, long = seconds[info.ttls[0]], seconds[info.ttls[-1]]
    elif info.provider == "openai":
        if info.regime == "N":
            short, long = SHORT_OPENAI, LONG_OPENAI
        else:
            short = long = RETAINED if info.retention_24h else IN_MEMORY
    else:
        short = long = info.idle_ttl if info.idle_ttl is not None else 300.0
    return Tariff(
        short=short,
        long=long,
        read=info.read,
        write_short=info.write_5m,
        write_long=info.write_1h if long > short else info.write_5m,
        storage=storage,
        create=info.write_1h,
        margin=margin,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """One idle gap as a record shows it. `seconds`: from the start of the call before it
    (which refreshed the entry) to the start of the next (`inf`: nobody came back).
    `cached`: tokens the entry holds, which the next call reads if it lives. `tail`:
    tokens after them the next call sends again (the last answer), which a keep-warm may
    write ahead of it. `long_lived`: the entry is a long-TTL one. `held`: an explicit
    cache holds `cached` until this many seconds into the gap (its storage is paid)."""

    seconds: float
    cached: int
    tail: int = 0
    long_lived: bool = False
    held: float | None = None
    overhead: int = 16  # a keep-warm's own placeholder message, billed as input


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """A refresh point of a gap (times in seconds from its start): what the entry is
    there, and what the gap spent to get there."""

    at: float  # when a keep-warm would start: a margin before the entry expires
    expires: float
    long_lived: bool  # a seal made it a long-TTL entry (or it was one)
    tail_written: bool  # a keep-warm wrote the last answer after the cached prefix
    spent: float  # base-input tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class Crossing:
    """How a gap was (or would best have been) crossed, and its cost."""

    moves: tuple[Move, ...]
    cost: float
    kept: bool  # the entry (or an explicit cache) was live when the user came back

    @property
    def summary(self) -> str:
        if not self.moves:
            return "nothing (back in time)"
        counts = {m: self.moves.count(m) for m in dict.fromkeys(self.moves)}
        return ", ".join(f"{n} {m}" if n > 1 else m for m, n in counts.items())


def rewrite(gap: Gap, t: Tariff) -> float:
    """What an expiry adds to the next call: its cached tokens written instead of read."""
    return (t.write_short - t.read) * gap.cached


def move_cost(move: Move, gap: Gap, t: Tariff, point: Point) -> float:
    """What a keep-warm `move` costs at `point`: reads of what is cached, writes of the
    tail not yet written, its placeholder as input."""
    tail = 0 if point.tail_written else gap.tail
    read = t.read * (gap.cached + (gap.tail if point.tail_written else 0))
    if move == "ping":
        return read + t.write_short * tail + gap.overhead
    if move == "seal":
        return read + t.write_long * tail + gap.overhead
    if move == "store":
        held = gap.cached + gap.tail
        hours = (gap.seconds - point.at) / 3600.0 if math.isfinite(gap.seconds) else math.inf
        return t.create * held + (t.storage or 0.0) * held * hours
    return 0.0


def moves_at(gap: Gap, t: Tariff, point: Point) -> tuple[Move, ...]:
    """What may be done at `point`: a seal needs a long TTL and an entry not yet kept (the
    accountant makes a long entry where a long marker reads a short one: a seal with no
    tail still works); storage needs an explicit-cache price."""
    can_seal = t.long > t.short and (not point.tail_written or point.long_lived)
    out: list[Move] = ["expire", "ping"]
    if can_seal and not point.long_lived:  # a long entry is kept by reading it (a ping)
        out.append("seal")
    if t.storage is not None:
        out.append("store")
    return tuple(out)


def step(move: Move, gap: Gap, t: Tariff, point: Point) -> Point:
    """The point after a ping or seal: the entry lives its lifetime from `point.at`."""
    long_lived = point.long_lived or move == "seal"
    life = t.long if long_lived else t.short
    expires = point.at + life
    return Point(
        at=expires - t.margin,
        expires=expires,
        long_lived=long_lived,
        tail_written=True,
        spent=point.spent + move_cost(move, gap, t, point),
    )


def start(gap: Gap, t: Tariff) -> Point:
    expires = t.long if gap.long_lived else t.short
    return Point(
        at=expires - t.margin,
        expires=expires,
        long_lived=gap.long_lived,
        tail_written=False,
        spent=0.0,
    )


def _returned(gap: Gap, t: Tariff, point: Point) -> float:
    """The gap's cost when the user is back while the entry lives: what was spent, less
    the tail a keep-warm wrote (the next call reads it instead of writing it)."""
    saved = (t.write_short - t.read) * gap.tail if point.tail_written else 0.0
    return point.spent - saved


def _terminal(move: Move, gap: Gap, t: Tariff, point: Point) -> float:
    """The gap's cost when `move` ends it: an expiry's rewrite, or an explicit cache
    stored until the return (which then reads cached and tail)."""
    if move == "expire":
        return point.spent + (rewrite(gap, t) if math.isfinite(gap.seconds) else 0.0)
    saved = (t.write_short - t.read) * gap.tail
    return point.spent + move_cost("store", gap, t, point) - saved


def _held(gap: Gap, t: Tariff) -> Crossing | None:
    """A gap that starts with an explicit cache held: it covers the gap, or is extended
    to the return (storage only), or is let go (the return rewrites)."""
    if gap.held is None:
        return None
    if gap.seconds <= gap.held:
        return Crossing(moves=(), cost=0.0, kept=True)
    lost = Crossing(
        moves=("expire",), cost=rewrite(gap, t) if math.isfinite(gap.seconds) else 0.0, kept=False
    )
    if t.storage is None or not math.isfinite(gap.seconds):
        return lost
    extend = t.storage * gap.cached * (gap.seconds - gap.held) / 3600.0
    return Crossing(moves=("extend",), cost=extend, kept=True) if extend < lost.cost else lost


def optimum(gap: Gap, t: Tariff) -> Crossing:
    """The cheapest crossing of `gap` knowing when the user comes back: a depth-first
    search over its refresh points, a branch dropped once it spends more than the best
    crossing found (every move costs something, so the search ends)."""
    held = _held(gap, t)
    if held is not None:
        return held
    if not math.isfinite(gap.seconds):  # nobody came back: anything spent was lost
        return Crossing(moves=("expire",), cost=0.0, kept=False)
    first = start(gap, t)
    if gap.seconds <= first.expires:
        return Crossing(moves=(), cost=0.0, kept=True)
    expire = _terminal("expire", gap, t, first)
    best = Crossing(moves=("expire",), cost=expire, kept=False)
    stack: list[tuple[Point, tuple[Move, ...]]] = [(first, ())]
    while stack:
        point, moves = stack.pop()
        if point.spent - (t.write_short - t.read) * gap.tail >= best.cost:
            continue  # even a free return cannot beat the best any more
        if gap.seconds <= point.expires:
            cost = _returned(gap, t, point)
            if cost < best.cost:
                best = Crossing(moves=moves, cost=cost, kept=True)
            continue
        for move in moves_at(gap, t, point):
            if move in ("expire", "store"):
                cost = _terminal(move, gap, t, point)
                if cost < best.cost:
                    best = Crossing(moves=(*moves, move), cost=cost, kept=move == "store")
            else:
                stack.append((step(move, gap, t, point), (*moves, move)))
    return best


Chooser = Callable[[Gap, Point], Move]
"""An online policy: at a refresh point (never told when the user comes back) a move."""


def replay(gap: Gap, t: Tariff, choose: Chooser, *, limit: int = 10_000) -> Crossing:
    """What an online policy pays across `gap` in the optimum's terms: it is asked at
    each refresh point until the user is back, it stops, or (`limit`) it gives up."""
    held = _held(gap, t)
    if held is not None:  # an explicit cache held: the policy's choice is the same menu
        return held
    point = start(gap, t)
    moves: list[Move] = []
    while gap.seconds > point.expires and len(moves) < limit:
        move = choose(gap, point)
        if move not in moves_at(gap, t, point):
            move = "expire"
        moves.append(move)
        if move in ("expire", "store"):
            cost = _terminal(move, gap, t, point)
            return Crossing(moves=tuple(moves), cost=cost, kept=move == "store")
        point = step(move, gap, t, point)
    if gap.seconds > point.expires:
        return Crossing(moves=tuple(moves), cost=_terminal("expire", gap, t, point), kept=False)
    return Crossing(moves=tuple(moves), cost=_returned(gap, t, point), kept=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Compared:
    """A sequence of gaps crossed by a policy and by foresight."""

    paid: tuple[Crossing, ...]
    best: tuple[Crossing, ...]

    @property
    def paid_cost(self) -> float:
        return sum(c.cost for c in self.paid)

    @property
    def best_cost(self) -> float:
        return sum(c.cost for c in self.best)

    def ratio(self, base: float = 0.0) -> float:
        """(`base` + paid) / (`base` + foresight): `base` is what the session pays
        whatever is done across its gaps (1.0 when both are zero)."""
        top, bottom = base + self.paid_cost, base + self.best_cost
        if bottom <= 0:
            return 1.0 if top <= 0 else math.inf
        return top / bottom


def compare(gaps: Sequence[Gap], t: Tariff, choose: Chooser) -> Compared:
    return Compared(
        paid=tuple(replay(g, t, choose) for g in gaps),
        best=tuple(optimum(g, t) for g in gaps),
    )
