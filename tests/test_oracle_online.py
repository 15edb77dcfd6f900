"""The floor of online keep-warm (`stoker.bench.oracle`): a policy told the distribution
of return times expects to pay no less than foresight and no more than any online policy,
the time policy included; on the bench's seeded mixtures it pays between the two."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.bench.oracle import LogUniformMixture, expected_online, expected_oracle, oracle
from stoker.bench.returns import KINDS, MIXTURES, gaps_of, run_mixtures, time_policy
from stoker.cache.foresight import Gap, Move, Point, optimum, replay, tariff
from stoker.cache.models import model_info
from stoker.cache.time_policy import TimePolicy

KEPT_WARM = ["claude-sonnet-4-6", "claude-opus-4-6", "anthropic.claude-sonnet-4-6"]


def foresight_at_least(gap: Gap, dist: LogUniformMixture, model: str) -> float:
    """A lower bound on what foresight expects `gap` to cost under `dist`: its cost only
    grows with the gap's length (a schedule that keeps the entry to a late return keeps
    it to every earlier one, for less), so each cell of equal probability is priced at
    its shortest gap."""
    t = tariff(model_info(model))
    return sum(
        weight * optimum(Gap(seconds=low, cached=gap.cached, tail=gap.tail), t).cost
        for weight, low, _ in dist.quantile_cells(60)
    )


mixtures = st.dictionaries(
    st.sampled_from(sorted(KINDS)), st.floats(min_value=0.05, max_value=1.0), min_size=1
)


@st.composite
def prefixes(draw: st.DrawFn, model: str) -> Gap:
    """A gap's prefix and last answer (its length is the distribution's to say)."""
    cached = draw(st.integers(min_value=model_info(model).min_cacheable, max_value=100_000))
    return Gap(seconds=math.inf, cached=cached, tail=draw(st.integers(1, cached // 10)))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), model=st.sampled_from(KEPT_WARM), weights=mixtures)
def test_the_oracle_expects_no_less_than_foresight_and_no_more_than_the_policy(
    data: st.DataObject, model: str, weights: dict[str, float]
) -> None:
    info = model_info(model)
    t = tariff(info)
    dist = LogUniformMixture.of(weights, KINDS)
    gap = data.draw(prefixes(model))
    floor = expected_oracle(gap, t, dist)
    assert expected_online(gap, t, dist, oracle(dist, t)) == pytest.approx(floor)  # one walk
    assert floor >= foresight_at_least(gap, dist, model) - 1e-6
    seen = data.draw(st.integers(min_value=0, max_value=60))
    history = gaps_of(weights, seen, random.Random(data.draw(st.integers())))
    for policy in (time_policy(info, TimePolicy(), gaps=history), time_policy(info, TimePolicy())):
        assert floor <= expected_online(gap, t, dist, policy) + 1e-6
    assert floor <= expected_online(gap, t, dist, never) + 1e-6


def never(gap: Gap, point: Point) -> Move:
    """The online policy that lets every entry expire."""
    return "expire"


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    model=st.sampled_from(KEPT_WARM),
    weights=mixtures,
    seconds=st.lists(st.floats(min_value=1.0, max_value=30 * 3600.0), min_size=1, max_size=8),
)
def test_on_any_gaps_the_oracle_pays_at_least_foresight(
    data: st.DataObject, model: str, weights: dict[str, float], seconds: list[float]
) -> None:
    """Even on gaps its distribution never draws: it is an online policy like another."""
    t = tariff(model_info(model))
    choose = oracle(LogUniformMixture.of(weights, KINDS), t)
    prefix = data.draw(prefixes(model))
    for s in seconds:
        gap = Gap(seconds=s, cached=prefix.cached, tail=prefix.tail)
        assert replay(gap, t, choose).cost >= optimum(gap, t).cost - 1e-6


def test_an_overnight_user_is_let_go_at_once_and_an_office_one_sealed() -> None:
    """Told the mixture, the oracle knows no one in *overnight* is back between a minute
    and twelve hours; in *office*, many of those still away at 5 minutes are back within
    the hour."""
    t = tariff(model_info("claude-sonnet-4-6"))
    gap = Gap(seconds=14 * 3600.0, cached=8_000, tail=70)
    overnight = replay(gap, t, oracle(LogUniformMixture.of(MIXTURES["overnight"], KINDS), t))
    assert overnight.moves == ("expire",)
    office = replay(gap, t, oracle(LogUniformMixture.of(MIXTURES["office"], KINDS), t))
    assert office.moves[0] == "seal"


def test_on_the_bench_mixtures_the_oracle_is_between_foresight_and_the_policy() -> None:
    """On the seeded samples, not in expectation: the policy could be lucky and pay less
    than the oracle, but not by more than a hundredth of what the gaps cost foresight."""
    for row in run_mixtures():
        assert row.floor is not None
        assert row.best <= row.floor + 1e-6, row
        assert row.floor <= row.paid + 0.01 * row.best, row


def test_the_oracle_refuses_a_tariff_with_explicit_caches() -> None:
    """Without `store` among its moves it is no floor where one is offered."""
    t = tariff(model_info("gemini-2.5-flash"))
    assert t.storage is not None
    with pytest.raises(ValueError, match="explicit caches"):
        oracle(LogUniformMixture.of(MIXTURES["chat"], KINDS), t)
