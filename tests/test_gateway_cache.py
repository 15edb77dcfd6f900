"""AgentCache bounds: LRU size and idle TTL, and never evicting an agent mid-turn."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from stoker.gateway.cache import AgentCache, CachedAgent
from stoker.gateway.session_settings import SessionSettings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def entry(sid: str) -> CachedAgent:
    fake: Any = SimpleNamespace(id=sid)
    return CachedAgent(
        session=fake, agent=fake, sink=fake, user="u", signature="s", settings=SessionSettings()
    )


def test_the_least_recently_used_idle_agent_goes_first() -> None:
    cache = AgentCache(max_size=2, now=Clock())
    for sid in ("a", "b"):
        cache.put(sid, entry(sid))
    used = cache.acquire("a")
    assert used is not None
    cache.release(used)
    cache.put("c", entry("c"))
    assert ("a" in cache, "b" in cache, "c" in cache) == (True, False, True)
    assert cache.evictions == {"lru": 1}


def test_an_agent_mid_turn_is_never_evicted_by_the_bounds() -> None:
    clock = Clock()
    cache = AgentCache(max_size=1, idle_ttl=10, now=clock)
    cache.put("a", entry("a"), busy=True)
    cache.put("b", entry("b"))  # over the bound: "a" is busy, so "b" (idle) goes
    assert "a" in cache
    assert "b" not in cache
    cache.put("c", entry("c"), busy=True)
    assert len(cache) == 2  # both busy: over the bound until one finishes
    clock.now = 100
    cache.sweep()
    assert len(cache) == 2  # idle for long, but mid-turn
    a = cache.peek("a")
    assert a is not None
    cache.release(a)  # finishing brings the cache back to its bound
    assert "a" not in cache
    assert "c" in cache


def test_idle_agents_expire_after_the_ttl() -> None:
    clock = Clock()
    cache = AgentCache(max_size=10, idle_ttl=60, now=clock)
    cache.put("old", entry("old"))
    clock.now = 30
    cache.put("new", entry("new"))
    clock.now = 61
    assert cache.acquire("new") is not None  # acquiring sweeps
    assert "old" not in cache
    assert cache.evictions == {"idle": 1}
