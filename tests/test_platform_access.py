"""The allowlist and the per-chat rate limit, by generation: no chat ever gets more than
its burst plus what the rate refilled, and a refused streak is told once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.platforms.access import Allowlist, ChatRates, RateLimit
from stoker.platforms.base import ChatKey

STEPS = st.lists(st.tuples(st.floats(0, 30), st.sampled_from("abc")), max_size=80)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@given(steps=STEPS, per_minute=st.floats(0, 120), burst=st.integers(1, 10))
def test_no_chat_exceeds_its_burst_plus_the_refill(
    steps: list[tuple[float, str]], per_minute: float, burst: int
) -> None:
    clock = Clock()
    rates = ChatRates(RateLimit(per_minute=per_minute, burst=burst), now=clock)
    allowed: dict[str, int] = {}
    first: dict[str, float] = {}
    streak: dict[str, int] = {}
    for dt, chat in steps:
        clock.now += dt
        first.setdefault(chat, clock.now)
        ok, tell = rates.take(chat)
        if ok:
            allowed[chat] = allowed.get(chat, 0) + 1
            streak[chat] = 0
            assert not tell
        else:
            streak[chat] = streak.get(chat, 0) + 1
            assert tell == (streak[chat] == 1)  # told at the first refusal of a streak
            assert rates.wait(chat) > 0
        refill = (clock.now - first[chat]) * per_minute / 60
        if per_minute == 0:  # no limit
            assert ok
        else:
            assert allowed.get(chat, 0) <= burst + refill + 1e-9


def test_the_allowlist_answers_nobody_until_configured() -> None:
    key = ChatKey(platform="telegram", chat="-100", user="42")
    assert not Allowlist().allows(key)
    assert Allowlist(users=frozenset({"42"})).allows(key)
    assert Allowlist(chats=frozenset({"-100"})).allows(key)
    assert Allowlist(users=frozenset({"*"})).allows(key)
    assert not Allowlist(users=frozenset({"4"}), chats=frozenset({"-10"})).allows(key)
