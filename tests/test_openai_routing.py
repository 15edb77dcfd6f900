"""Regime L routing in the OpenAI simulator: a route (first tokens + prompt_cache_key) keeps
its cache on one machine until it carries more than about 15 requests a minute; then
requests overflow to machines that do not hold the prefix."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.cache.accounting import OpenAIAccountant, OpenAISettings
from tests.accounting_helpers import pad, part

OLD = "gpt-4.1"  # regime L: implicit 128-token grid, free writes


def payload(question: str, key: str = "shared") -> dict[str, Any]:
    developer = {"role": "developer", "content": [part(1500)]}
    asks = {"role": "user", "content": pad(100, question)}
    return {"model": OLD, "input": [developer, asks], "prompt_cache_key": key}


def test_a_route_under_the_rate_reads_on_its_own_machine() -> None:
    acc = OpenAIAccountant()
    acc.account(payload("q0"), api="responses", at=0.0)
    for n in range(1, 15):
        outcome = acc.account(payload(f"q{n}"), api="responses", at=n * 4.0)
        assert outcome.usage.read == 1408  # the last grid boundary in the developer block
        assert not outcome.misses


def test_the_sixteenth_request_in_a_minute_overflows_to_a_cold_machine() -> None:
    acc = OpenAIAccountant()
    for n in range(15):
        acc.account(payload(f"q{n}"), api="responses", at=n * 1.0)
    overflow = acc.account(payload("q15"), api="responses", at=15.0)
    assert overflow.usage.read == 0
    assert overflow.misses[0].cause == "overflow"
    assert overflow.misses[0].requests == 16
    assert "another machine" in overflow.misses[0].describe()
    # Another key is another route: its own rate, its own machine.
    other = acc.account(payload("q16", key="other"), api="responses", at=16.0)
    assert [m.cause for m in other.misses] != ["overflow"]
    # A minute later the route is quiet again and back on the machine that holds it.
    back = acc.account(payload("q17"), api="responses", at=80.0)
    assert back.usage.read == 1408
    assert not back.misses


def test_overflow_can_be_turned_off() -> None:
    acc = OpenAIAccountant(OpenAISettings(overflow_per_minute=None))
    acc.account(payload("q0"), api="responses", at=0.0)
    for n in range(1, 40):
        assert acc.account(payload(f"q{n}"), api="responses", at=n * 0.5).usage.read == 1408


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 30), st.sampled_from(["a", "b"])), max_size=40))
def test_routing_is_deterministic_and_never_overflows_under_the_rate(
    steps: list[tuple[float, str]],
) -> None:
    """Two simulators fed one sequence agree call for call, and a route never overflows
    while it carries at most 15 requests in the trailing minute."""
    first, second = OpenAIAccountant(), OpenAIAccountant()
    at = 0.0
    times: dict[str, list[float]] = {"a": [], "b": []}
    for n, (wait, key) in enumerate(steps):
        at += wait
        times[key].append(at)
        a = first.account(payload(f"q{n}", key), api="responses", at=at)
        b = second.account(payload(f"q{n}", key), api="responses", at=at)
        assert a == b
        recent = sum(1 for t in times[key] if t > at - 60.0)
        if recent <= 15:
            assert all(m.cause != "overflow" for m in a.misses)
