"""When people come back: seeded generators of idle gaps, and the time policy held to
perfect foresight on them (`stoker bench cache --workload foresight`).

Real users come back on patterns: a reply within a minute, a coffee break, lunch, the
next morning. A *kind* draws one gap (log-uniform between its bounds); a *mixture*
weighs kinds; a *user* is a run of sessions whose gaps come from one mixture, each
session's prefix growing turn by turn. The time policy crosses every gap not knowing
when the user comes back, seeing only the gaps of the sessions before and of this one
so far (as a store's history grows); foresight (`stoker.cache.foresight`) crosses it
knowing. Both are priced the same way, so the ratio is the policy's competitive ratio:
over the whole session's input (what a user pays) and over the gaps alone (what the
decisions cost). Beside them, on each mixture, the floor of every online policy: one told
the mixture itself (`stoker.bench.oracle`), which is what could still be learned and what
no online policy knows. The fuzz draws sequences from random mixtures, sizes and lengths,
and prints the worst.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rich.table import Table

from stoker.bench.oracle import LogUniformMixture, oracle
from stoker.bench.tables import figures_table
from stoker.cache.foresight import Chooser, Gap, Move, Point, Tariff, compare, replay, tariff
from stoker.cache.hindsight import hindsight
from stoker.cache.models import ModelInfo, model_info
from stoker.cache.robust import settle
from stoker.cache.time_policy import Idle, TimePolicy, decide
from stoker.config import DEFAULT_MODEL
from stoker.wire.figures import json_ratio
from stoker.wire.record import CacheRecord

if TYPE_CHECKING:
    from stoker.bench.cache import WorkloadFigures

KINDS: dict[str, tuple[float, float]] = {
    "quick": (5.0, 90.0),  # a reply within a minute or so
    "break": (4 * 60.0, 25 * 60.0),  # a coffee break, a meeting's first half
    "lunch": (35 * 60.0, 100 * 60.0),
    "next-day": (12 * 3600.0, 20 * 3600.0),
}
"""Each kind of return: its bounds in seconds (a gap is log-uniform between them)."""

MIXTURES: dict[str, dict[str, float]] = {
    "chat": {"quick": 0.7, "break": 0.25, "next-day": 0.05},
    "office": {"quick": 0.4, "break": 0.3, "lunch": 0.15, "next-day": 0.15},
    "overnight": {"quick": 0.5, "next-day": 0.5},
    "breaks": {"break": 0.6, "lunch": 0.4},
}
"""The named mixtures the bench prints: weights of each kind of return."""

PREFIX = 8_000  # tokens of tools and system prompt, cached from the first call
GROWTH = 300  # tokens a turn adds to the history (its messages)
TAIL = 70  # tokens of the last answer, which the next call sends again
CALLS_PER_TURN = 4  # a tool-using turn: a few tool calls and the answer (the hard
# workload's turns average 8), each reading the prefix and writing what it adds


def time_policy(
    info: ModelInfo, policy: TimePolicy, *, gaps: Sequence[float] = (), slack: float = 0.0
) -> Chooser:
    """Stoker's time policy (`time_policy.decide`, with `gaps` seen before and the
    session's `slack`) as a chooser: each refresh point becomes the `Idle` it would see
    there."""

    def choose(gap: Gap, point: Point) -> Move:
        written = point.tail_written
        life = long if point.long_lived else short
        idle = Idle(
            refreshed_at=point.expires - life,
            live_for=life,
            idle_since=0.0,
            cached=gap.cached + (gap.tail if written else 0),
            tail=0 if written else gap.tail,
            long_lived=point.long_lived,
            overhead=gap.overhead,
            spent=point.spent,
            slack=slack,
        )
        action = decide(idle, info, policy, gaps=gaps).action
        if action == "seal" and point.long_lived:
            return "ping"  # re-sealing a long entry with nothing new is reading it again
        return "ping" if action == "ping" else "seal" if action == "seal" else "expire"

    menu = tariff(info, margin=policy.margin)
    short, long = menu.short, menu.long
    return choose


def draw(kind: str, rng: random.Random) -> float:
    low, high = KINDS[kind]
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def gaps_of(mixture: dict[str, float], n: int, rng: random.Random) -> list[float]:
    """`n` gaps from `mixture` (seconds)."""
    kinds = sorted(mixture)
    return [draw(k, rng) for k in rng.choices(kinds, [mixture[k] for k in kinds], k=n)]


def session(seconds: Sequence[float], *, prefix: int = PREFIX, growth: int = GROWTH) -> list[Gap]:
    """A session crossing `seconds`: before gap i its prefix holds `prefix + i * growth`."""
    return [Gap(seconds=s, cached=prefix + i * growth, tail=TAIL) for i, s in enumerate(seconds)]


def base_cost(gaps: Sequence[Gap], t: Tariff) -> float:
    """What the session pays whatever is done across its gaps: its first write, and each
    return's turn: `CALLS_PER_TURN` calls, each reading what was cached before it and
    writing its share of what the turn adds."""
    if not gaps:
        return 0.0
    first = t.write_short * gaps[0].cached
    step = (gaps[0].tail + GROWTH) / CALLS_PER_TURN
    turns = sum(
        t.read * (g.cached + k * step) + t.write_short * step
        for g in gaps
        for k in range(CALLS_PER_TURN)
    )
    return first + turns


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """A workload (or one fuzzed sequence) crossed by the policy and by foresight, and,
    where its gaps come from a known mixture, by the oracle (`floor`)."""

    name: str
    gaps: int
    base: float
    paid: float
    best: float
    floor: float | None = None  # what the best online policy paid across the gaps
    worst: tuple[float, ...] = ()  # the gaps of the worst sequence, for the fuzz

    @property
    def ratio(self) -> float:
        """Policy / foresight over the sessions' whole input cost."""
        return (self.base + self.paid) / (self.base + self.best) if self.base + self.best else 1.0

    @property
    def gap_ratio(self) -> float:
        """Policy / foresight over what the gaps cost alone."""
        if self.best <= 0:
            return 1.0 if self.paid <= 0 else math.inf
        return self.paid / self.best

    @property
    def floor_ratio(self) -> float | None:
        """The oracle / foresight over the sessions' whole input cost."""
        if self.floor is None:
            return None
        return replace(self, paid=self.floor).ratio

    @property
    def floor_gap_ratio(self) -> float | None:
        """The oracle / foresight over what the gaps cost alone."""
        return None if self.floor is None else replace(self, paid=self.floor).gap_ratio


def run_user(
    sessions: Sequence[Sequence[float]],
    info: ModelInfo,
    policy: TimePolicy,
    *,
    name: str,
    seen: Sequence[float] = (),
) -> Measured:
    """One user's sessions in order: each gap crossed by the time policy with the gaps
    seen so far (`seen`, then every gap before this one), and by foresight."""
    t = tariff(info, margin=policy.margin)
    history = list(seen)
    slack = 0.0
    base = paid = best = 0.0
    count = 0
    for seconds in sessions:
        gaps = session(seconds)
        base += base_cost(gaps, t)
        pass
        for gap in gaps:
            compared = compare([gap], t, time_policy(info, policy, gaps=history, slack=slack))
            paid += compared.paid_cost
            best += compared.best_cost
            slack = settle(slack, paid=compared.paid_cost, best=compared.best_cost)
            history.append(gap.seconds)
            count += 1
    return Measured(name=name, gaps=count, base=base, paid=paid, best=best)


def mixture_users(
    *, users: int = 8, sessions: int = 6, turns: int = 12, seed: int = 40
) -> dict[str, list[list[list[float]]]]:
    """For each named mixture, `users` users of `sessions` sessions of `turns` gaps."""
    rng = random.Random(seed)
    return {
        name: [[gaps_of(mix, turns, rng) for _ in range(sessions)] for _ in range(users)]
        for name, mix in MIXTURES.items()
    }


def run_oracle(sessions: Sequence[Sequence[float]], mixture: dict[str, float], t: Tariff) -> float:
    """What the best online policy, told `mixture` (`stoker.bench.oracle`), pays across
    the gaps of `sessions`."""
    choose = oracle(LogUniformMixture.of(mixture, KINDS), t)
    return sum(replay(gap, t, choose).cost for seconds in sessions for gap in session(seconds))


def run_mixtures(
    info: ModelInfo | None = None, policy: TimePolicy | None = None, *, seed: int = 40
) -> list[Measured]:
    """Each named mixture: one agent's users, one after another, the estimate learning
    from every session before (the agent's history in its store); and the oracle told
    the mixture, which learns nothing."""
    info = info or model_info(DEFAULT_MODEL)
    policy = policy or TimePolicy()
    t = tariff(info, margin=policy.margin)
    out = []
    for name, users in mixture_users(seed=seed).items():
        sessions = [s for user in users for s in user]
        measured = run_user(sessions, info, policy, name=name)
        out.append(replace(measured, floor=run_oracle(sessions, MIXTURES[name], t)))
    return out


FUZZ_SEED = 4040
"""The fuzz's seed unless told another (`--seed`)."""


def fuzz_sequences(n: int, *, seed: int = FUZZ_SEED) -> list[list[float]]:
    """`n` random gap sequences: random weights over the kinds, or log-uniform from a
    second to 30 hours, or one gap length repeated (the adversary of a learner), 1 to
    40 gaps each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(1, 40)
        style = rng.random()
        if style < 0.4:
            weights = {k: rng.random() for k in KINDS}
            out.append(gaps_of(weights, length, rng))
        elif style < 0.8:
            out.append([math.exp(rng.uniform(0.0, math.log(30 * 3600.0))) for _ in range(length)])
        else:
            one = math.exp(rng.uniform(math.log(200.0), math.log(30 * 3600.0)))
            out.append([one] * length)
    return out


def run_fuzz(
    n: int = 300,
    info: ModelInfo | None = None,
    policy: TimePolicy | None = None,
    *,
    seed: int = FUZZ_SEED,
) -> Measured:
    """Every fuzzed sequence as one session of a new user; the worst by its gaps' ratio."""
    info = info or model_info(DEFAULT_MODEL)
    policy = policy or TimePolicy()
    worst: Measured | None = None
    for i, seconds in enumerate(fuzz_sequences(n, seed=seed)):
        one = run_user([seconds], info, policy, name=f"fuzz #{i}")
        if worst is None or one.gap_ratio > worst.gap_ratio:
            worst = replace(one, worst=tuple(seconds))
    assert worst is not None
    return worst


def from_records(name: str, records: Sequence[CacheRecord]) -> Measured | None:
    """A workload the bench ran for real (its records), as paid and with foresight."""
    seen = hindsight(records)
    if seen is None:
        return None
    paid = sum(g.paid for g in seen.gaps)
    best = sum(g.best.cost for g in seen.gaps)
    return Measured(name=name, gaps=len(seen.gaps), base=seen.paid - paid, paid=paid, best=best)


def foresight_table(rows: Sequence[Measured], worst: Measured) -> Table:
    columns = (
        "workload",
        "gaps",
        "session paid",
        "foresight",
        "ratio",
        "gaps paid",
        "foresight ",
        "gap ratio",
        "oracle ratio",
        "oracle gap ratio",
    )
    table = figures_table(
        "bench cache: the time policy against perfect foresight", columns, labels={"workload"}
    )
    names = [m.name for m in rows] + [f"fuzz worst ({worst.name.removeprefix('fuzz ')})"]
    table.columns[0].no_wrap = True  # the figures give way around a row's name
    table.columns[0].min_width = max(map(len, names))
    for name, m in zip(names, (*rows, worst), strict=True):
        table.add_row(
            name,
            str(m.gaps),
            f"{m.base + m.paid:,.0f}",
            f"{m.base + m.best:,.0f}",
            f"{m.ratio:.3f}x",
            f"{m.paid:,.0f}",
            f"{m.best:,.0f}",
            f"{m.gap_ratio:.3f}x",
            "-" if m.floor_ratio is None else f"{m.floor_ratio:.3f}x",
            "-" if m.floor_gap_ratio is None else f"{m.floor_gap_ratio:.3f}x",
        )
    table.caption = (
        "oracle: the best online policy, told each mixture (not its gaps); worst fuzzed "
        "sequence (seconds): " + ", ".join(f"{s:,.0f}" for s in worst.worst)
    )
    table.caption_justify = "left"
    return table


def run_foresight(
    workloads: Sequence[WorkloadFigures], *, fuzz: int = 300, seed: int = FUZZ_SEED
) -> tuple[list[Measured], Measured]:
    """The rows `stoker bench cache --workload foresight` prints: the hard and extended
    runs among `workloads`, the named mixtures, and the worst of `fuzz` sequences drawn
    with `seed`."""
    rows = [
        m
        for w in workloads
        if w.name in ("hard", "extended")
        for m in (from_records(w.name, w.records),)
        if m is not None
    ]
    mixtures = run_mixtures()
    return [*rows, *(replace(m, name=f"mix {m.name}") for m in mixtures)], run_fuzz(fuzz, seed=seed)


def foresight_dict(rows: Sequence[Measured], worst: Measured) -> dict[str, Any]:
    def one(m: Measured) -> dict[str, Any]:
        return {
            "workload": m.name,
            "gaps": m.gaps,
            "session_paid": round(m.base + m.paid, 1),
            "session_foresight": round(m.base + m.best, 1),
            "ratio": json_ratio(m.ratio),
            "gaps_paid": round(m.paid, 1),
            "gaps_foresight": round(m.best, 1),
            "gap_ratio": json_ratio(m.gap_ratio),
            "gaps_oracle": None if m.floor is None else round(m.floor, 1),
            "oracle_ratio": json_ratio(m.floor_ratio),
            "oracle_gap_ratio": json_ratio(m.floor_gap_ratio),
        }

    return {
        "workloads": [one(m) for m in rows],
        "fuzz_worst": {**one(worst), "seconds": [round(s, 1) for s in worst.worst]},
    }
