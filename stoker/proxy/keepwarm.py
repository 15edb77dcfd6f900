"""Optimize mode's keep-warm: a ping or a seal before a lineage's cache entry expires,
when it pays.

The decision is Stoker's own (`stoker.cache.time_policy.decide`), with the inputs Stoker's
sessions give it: the cost of each request against the rewrite it saves times the chance
the client is back while the entry lives, from the gaps seen in the lineage, capped at
one rewrite per gap. Both are the lineage's last forwarded body as an Anthropic pre-warm
(`max_tokens: 0`), generating nothing:

- a *ping* sends it as it was: it reads the whole prefix the last call wrote, which
  refreshes the entry for another 5 minutes;
- a *seal* appends the answer the upstream gave to that body (what the client resends
  next, as frameworks replay an assistant turn as they received it) and a placeholder
  user message, with 1-hour breakpoints on tools+system and on the answer's last block:
  it reads the prefix and writes the answer once at the 1-hour rate, and the settled
  prefix then lives an hour with nothing more sent. The tail it writes is the answer's
  output tokens, as the provider counted them.

A client that re-serialises the answer (another key order) misses the sealed tail; the
1-hour marker on tools+system keeps that part in any case.

Time comes from a `Clock`: with the system clock `run()` sleeps until the next ping is
due; with a `FrozenClock`, `idle(seconds)` moves through each due time in order, so a
benchmark crosses a gap in milliseconds and sends exactly the pings a real one would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import Idle, WarmPlan, decide
from stoker.clock import Clock, FrozenClock
from stoker.errors import ConfigError
from stoker.proxy.lineage import LineageState
from stoker.proxy.markers import place, strip
from stoker.proxy.recorder import info_of
from stoker.wire.request import Breakpoint

log = logging.getLogger(__name__)

Ping = Callable[[LineageState, WarmPlan], Awaitable[None]]


PLACEHOLDER = {"role": "user", "content": "(keep-warm request: no answer is needed)"}
"""The user message after a seal's breakpoint: sent, never cached (as Stoker's own)."""
PLACEHOLDER_TOKENS = 16


def ping_body(lineage: LineageState) -> dict[str, Any] | None:
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


def _sealable(answer: list[Any] | None) -> int | None:
    """The index of the answer's last block a breakpoint may sit on (not thinking, not an
    empty text), or None."""
    for i in range(len(answer or ()) - 1, -1, -1):
        block = answer[i]  # type: ignore[index]
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("thinking", "redacted_thinking") or kind is None:
            continue
        if kind == "text" and not block.get("text"):
            continue
        return i
    return None


def seal_body(lineage: LineageState) -> dict[str, Any] | None:
    """The pre-warm a lineage's seal sends: its ping with the answer and a placeholder
    appended, 1-hour markers on tools+system and the answer (None: nothing to seal)."""
    body = ping_body(lineage)
    answer = lineage.last_answer
    at = _sealable(answer)
    if body is None or answer is None or at is None:
        return None
    sealed: dict[str, Any] = json.loads(json.dumps(body))  # its own copy: markers go in place
    turn = {"role": "assistant", "content": json.loads(json.dumps(answer))}
    sealed["messages"] = [*sealed["messages"], turn, dict(PLACEHOLDER)]
    strip(sealed)
    last = len(sealed["messages"]) - 2
    place(
        sealed, (Breakpoint(message=None, ttl="1h"), Breakpoint(message=last, block=at, ttl="1h"))
    )
    return sealed


def warm_body(lineage: LineageState, plan: WarmPlan) -> dict[str, Any] | None:
    """What `plan` sends for `lineage`."""
    return seal_body(lineage) if plan.action == "seal" else ping_body(lineage)


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
    sealable = _sealable(lineage.last_answer) is not None
    idle = Idle(
        refreshed_at=lineage.refreshed_at,
        live_for=lineage.live_for,
        idle_since=lineage.previous_started_at,
        cached=lineage.previous_cached,
        tail=lineage.answer_tokens if sealable else 0,
        long_lived=lineage.live_for >= 3600.0,
        overhead=PLACEHOLDER_TOKENS,
        spent=lineage.warm_spent,
        slack=lineage.account.slack,
    )
    return decide(idle, info, policy.keep_warm, gaps=lineage.gaps)


class ProxyKeepWarm:
    """Watches optimized lineages and sends their pings on time.

    A lineage's plan depends only on its own state, so it is decided when that changes
    (its call was read, its ping sent) and kept: a request costs one decision, not one
    per watched lineage. A lineage with nothing worth keeping is not watched.
    """

    def __init__(
        self,
        clock: Clock,
        policy: CachePolicy,
        ping: Ping,
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        self.clock = clock
        self.policy = policy
        self._ping = ping
        # held while a plan reads its lineage: a sync in-process client's threads move
        # lineages on while this decides on another
        self._lock = lock if lock is not None else contextlib.nullcontext()
        self._plans: dict[str, tuple[LineageState, WarmPlan]] = {}
        self._changed = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def _decide(self, lineage: LineageState) -> None:
        with self._lock:
            plan = warm_plan(lineage, self.policy)
        if plan is not None and plan.sends:
            self._plans[lineage.id] = (lineage, plan)
        else:
            self._plans.pop(lineage.id, None)

    def watch(self, lineage: LineageState) -> None:
        """Keep `lineage` warm from now on; starts the timer on a real clock."""
        self._decide(lineage)
        self._changed.set()
        if self._task is None and not self._stopping and not isinstance(self.clock, FrozenClock):
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
        """Send pings as they fall due, until closed (a real clock).

        `asyncio.timeout`, not `wait_for`: on Python 3.11 `wait_for` can swallow the
        cancel that closes this loop when the event it waits on is set in the same
        turn of the loop (a call recorded as the client closes), and the loop would
        then wait forever; `_stopping` ends it in any case."""
        while not self._stopping:
            self._changed.clear()
            due = self.due()
            wait = None if not due else max(0.0, due[0][0] - self.clock.now())
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._changed.wait()
                continue
            if not await self.fire_due():
                await asyncio.sleep(1.0)

    async def aclose(self) -> None:
        self._stopping = True
        self._changed.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
