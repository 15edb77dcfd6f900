"""Optimize mode's keep-warm: a ping before a lineage's cache entry expires, when it pays.

The decision is Stoker's own (`stoker.cache.time_policy.decide`): the cost of a ping
against the rewrite it saves times the chance the client is back while the entry lives,
from the gaps seen in the lineage, capped at one rewrite per gap. A ping is the
lineage's last forwarded body as an Anthropic pre-warm (`max_tokens: 0`): it reads the
whole prefix the last call wrote, which refreshes it, and generates nothing. It cannot
seal (write a 1-hour entry past the last write), since the proxy does not author the
assistant turn the client will send next.

Time comes from a `Clock`: with the system clock `run()` sleeps until the next ping is
due; with a `FrozenClock`, `idle(seconds)` moves through each due time in order, so a
benchmark crosses a gap in milliseconds and sends exactly the pings a real one would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import Idle, WarmPlan, decide
from stoker.clock import Clock, FrozenClock
from stoker.errors import ConfigError
from stoker.proxy.lineage import LineageState
from stoker.proxy.recorder import info_of

log = logging.getLogger(__name__)

Ping = Callable[[LineageState, WarmPlan], Awaitable[None]]


def ping_body(lineage: LineageState) -> dict[str, object] | None:
    """The pre-warm a lineage's ping sends, or None where the API refuses one (a stream
    is turned off; extended thinking and a forced tool choice cannot pre-warm)."""
    payload = lineage.last_payload
    if payload is None or lineage.dialect != "anthropic":
        return None
    if (payload.get("thinking") or {}).get("type") == "enabled":
        return None
    if (payload.get("tool_choice") or {}).get("type") in ("tool", "any"):
        return None
    body = {k: v for k, v in payload.items() if k not in ("stream", "output_config")}
    body["max_tokens"] = 0
    return body


def warm_plan(lineage: LineageState, policy: CachePolicy) -> WarmPlan | None:
    """What to do before the lineage's entry expires (None: nothing is cached to keep)."""
    if (
        ping_body(lineage) is None
        or lineage.refreshed_at is None
        or lineage.previous_started_at is None
        or not lineage.previous_cached
        or lineage.previous is None
    ):
        return None
    info = info_of(lineage.previous.prefix.params.model, lineage.dialect)
    idle = Idle(
        refreshed_at=lineage.refreshed_at,
        live_for=lineage.live_for,
        idle_since=lineage.previous_started_at,
        cached=lineage.previous_cached,
        tail=0,
        overhead=0,
        spent=lineage.warm_spent,
    )
    return decide(idle, info, policy.keep_warm, gaps=lineage.gaps)


class ProxyKeepWarm:
    """Watches optimized lineages and sends their pings on time.

    A lineage's plan depends only on its own state, so it is decided when that changes
    (its call was read, its ping sent) and kept: a request costs one decision, not one
    per watched lineage. A lineage with nothing worth keeping is not watched.
    """

    def __init__(self, clock: Clock, policy: CachePolicy, ping: Ping) -> None:
        self.clock = clock
        self.policy = policy
        self._ping = ping
        self._plans: dict[str, tuple[LineageState, WarmPlan]] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _decide(self, lineage: LineageState) -> None:
        plan = warm_plan(lineage, self.policy)
        if plan is not None and plan.sends:
            self._plans[lineage.id] = (lineage, plan)
        else:
            self._plans.pop(lineage.id, None)

    def watch(self, lineage: LineageState) -> None:
        """Keep `lineage` warm from now on; starts the timer on a real clock."""
        self._decide(lineage)
        self._changed.set()
        if self._task is None and not isinstance(self.clock, FrozenClock):
            self._task = asyncio.get_running_loop().create_task(self.run())

    def due(self) -> list[tuple[float, LineageState, WarmPlan]]:
        plans = ((plan.at, lineage, plan) for lineage, plan in self._plans.values())
        return sorted(plans, key=lambda item: item[0])

    async def fire_due(self) -> int:
        """Send every ping due now; how many were sent (failures are logged)."""
        now = self.clock.now()
        sent = 0
        for at, lineage, plan in self.due():
            if at > now:
                break
            lineage.warm_spent += plan.cost
            try:
                await self._ping(lineage, plan)
                sent += 1
            except Exception as exc:  # a failed ping changes nothing; the next turn pays
                log.warning("keep-warm ping for lineage %s failed: %r", lineage.id, exc)
            self._decide(lineage)  # its spend, and what the ping refreshed, moved the plan
        return sent

    async def idle(self, seconds: float) -> int:
        """Let `seconds` pass on a `FrozenClock`, sending each ping at its due time."""
        if not isinstance(self.clock, FrozenClock):
            raise ConfigError("ProxyKeepWarm.idle needs a FrozenClock")
        end = self.clock.at + seconds
        sent = 0
        while (due := self.due()) and due[0][0] <= end:
            self.clock.at = max(self.clock.at, due[0][0])
            fired = await self.fire_due()
            sent += fired
            if not fired and self.due() and self.due()[0][0] == due[0][0]:
                break
        self.clock.at = end
        return sent

    async def run(self) -> None:
        """Send pings as they fall due, until cancelled (a real clock)."""
        while True:
            self._changed.clear()
            due = self.due()
            wait = None if not due else max(0.0, due[0][0] - self.clock.now())
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
                continue
            if not await self.fire_due():
                await asyncio.sleep(1.0)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
