"""The cache clock: how long a session's prefix stays cached and what its next message
costs now against after expiry, computed once (`stoker.agent.cache_clock`) and shown by
`stoker chat` (after each answer and on /usage) and the gateway's session JSON."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path

from stoker.agent.cache_clock import CacheClock, cache_clock, money
from stoker.cache.models import model_info
from stoker.cache.time_policy import WarmPlan
from stoker.clock import FrozenClock
from stoker.gateway.views import usage_view
from stoker.session_views import show_session
from stoker.store.sqlite import SQLiteStore
from stoker.wire.record import CacheRecord
from stoker.wire.request import Breakpoint
from stoker.wire.usage import Usage
from tests.cli_rig import chat
from tests.helpers import sim_agent
from tests.test_gateway_support import auth, client, make_rig

SONNET = model_info("claude-sonnet-4-6")  # $3 input, $0.30 read, $3.75 5m write, $6 1h write


async def _one_turn(tmp_path: Path, clock: FrozenClock) -> tuple[CacheRecord, ...]:
    agent, _ = sim_agent(clock=clock, keep_warm=False)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "known")
        await session.send("hello")
        return session.records


async def test_the_figures_of_a_known_session(tmp_path: Path) -> None:
    clock = FrozenClock()
    (real,) = await _one_turn(tmp_path, clock)
    # A known call: 10,000 tokens read, 500 written at 5 minutes, 200 of answer.
    known = replace(real, usage=Usage(read=10_000, written_5m=500, output=200))
    found = cache_clock([known], SONNET)
    assert known.breakpoints[-1].ttl == "5m"
    assert replace(found, next_cost_now=None, next_cost_cold=None) == CacheClock(
        model="claude-sonnet-4-6",
        cached_tokens=10_500,  # what the call read and wrote: the entry it left
        new_tokens=200,  # its answer joins the history after that entry
        ttl="5m",
        refreshed_at=known.started_at,
        warm_until=known.started_at + 300,
    )
    assert found.next_cost_now is not None
    assert found.next_cost_cold is not None
    # now: the entry read at $0.30/M, the answer written at $3.75/M
    assert round(found.next_cost_now, 9) == round((10_500 * 0.30 + 200 * 3.75) / 1e6, 9)
    # cold: all of it written again at $3.75/M
    assert round(found.next_cost_cold, 9) == round(10_700 * 3.75 / 1e6, 9)
    assert found.next_cost(known.started_at + 299) == found.next_cost_now
    assert found.next_cost(known.started_at + 301) == found.next_cost_cold
    assert found.seconds_left(known.started_at + 60) == 240
    # the user's next message, when known, is written with the rest
    with_message = cache_clock([known], SONNET, message_tokens=50)
    assert with_message.new_tokens == 250
    # an entry written at 1 hour lives an hour and is rewritten at the 1-hour price
    hour = replace(known, breakpoints=(Breakpoint(message=None, ttl="1h"),))
    long = cache_clock([hour], SONNET)
    assert long.warm_until == known.started_at + 3600
    assert round(long.next_cost_cold or 0, 9) == round(10_700 * 6.0 / 1e6, 9)


async def test_a_keep_warm_call_resets_the_clock_and_leaves_nothing_after_it(
    tmp_path: Path,
) -> None:
    clock = FrozenClock()
    (turn,) = await _one_turn(tmp_path, clock)
    seal = replace(
        turn,
        purpose="seal",
        started_at=turn.started_at + 270,
        usage=Usage(read=10_000, written_1h=700, uncached=16),
        breakpoints=(Breakpoint(message=None, ttl="1h"), Breakpoint(message=1, ttl="1h")),
    )
    found = cache_clock([turn, seal], SONNET)
    assert found.cached_tokens == 10_700
    assert found.new_tokens == 0
    assert found.warm_until == seal.started_at + 3600
    assert round(found.next_cost_now or 0, 9) == round(10_700 * 0.30 / 1e6, 9)


async def test_nothing_cached_costs_the_same_now_and_later(tmp_path: Path) -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(clock=clock, keep_warm=False, system="Short.")
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "short")
        await session.send("hello")
    found = cache_clock(session.records, SONNET)
    assert found.warm_until is None
    assert found.cached_tokens == 0
    assert found.next_cost_now == found.next_cost_cold is not None
    assert cache_clock([], SONNET).lines(clock.now()) == ["cache: nothing sent yet"]


async def test_the_live_plan_is_priced(tmp_path: Path) -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(clock=clock, keep_warm=False)
    async with SQLiteStore(tmp_path / "s.db") as store:
        session = await agent.open(store, "planned")
        await session.send("hello")
        plan = session.warm_plan()
    assert plan is not None
    assert plan.sends
    found = cache_clock(session.records, SONNET, plan=plan)
    assert found.planned is not None
    assert found.planned.action == plan.action
    assert found.planned.at == plan.at
    assert found.planned.cost_usd == plan.cost * 3.0 / 1e6  # base-input tokens at $3/M
    lines = found.lines(clock.now())
    assert lines[1].startswith(f"keep-warm: {plan.action} at ")
    assert money(found.planned.cost_usd) in lines[1]


def test_chat_shows_the_clock_after_each_answer_and_on_usage(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    (tmp_path / "notes.md").write_text("ship on friday\n")
    out = chat(tmp_path, "What files are in this folder?\n/usage\n/exit\n")
    assert "list_files" in out.output  # the demo model used the tool the question is about
    sid = re.search(r"session ([0-9a-f]{32})", out.output)
    assert sid is not None

    async def stored() -> CacheClock:
        async with SQLiteStore(db) as store:
            view = await show_session(store, sid[1])
        return cache_clock(view.records, SONNET)

    expected = asyncio.run(stored())
    assert expected.warm_until is not None
    text = " ".join(out.output.split())  # rich wraps long lines
    shown = (
        f"cache: {expected.cached_tokens:,} tokens warm until "
        if expected.cached_tokens
        else "cache: nothing cached"
    )
    assert text.count(shown) == 2  # after the answer, and on /usage
    assert text.count(f"input {money(expected.next_cost_now)} now, ") == 2
    assert text.count(f"{money(expected.next_cost_cold)} after expiry") == 2
    assert "keep-warm: seal at " in text or "keep-warm: ping at " in text


async def test_the_gateway_session_json_has_the_clock(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "gw.db") as store:
        rig = make_rig(store, keep_warm=False)
        async with client(rig) as c:
            sid = (await c.post("/v1/sessions", json={}, headers=auth("alice"))).json()["id"]
            empty = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()
            assert empty["warm_until"] is None
            sent = await c.post(
                f"/v1/sessions/{sid}/messages", json={"text": "hello"}, headers=auth("alice")
            )
            assert sent.status_code == 200, sent.text
            history = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()
            usage = (await c.get(f"/v1/sessions/{sid}/usage", headers=auth("alice"))).json()
        await rig.gateway.close()
        view = await show_session(store, sid)
    (last,) = view.records
    cached = last.usage.read + last.usage.written
    new = last.usage.uncached + last.usage.output
    for body in (history, usage):
        assert body["warm_until"] == last.started_at + 300
        assert round(body["next_cost_now"], 9) == round((cached * 0.30 + new * 3.75) / 1e6, 9)
        assert round(body["next_cost_cold"], 9) == round((cached + new) * 3.75 / 1e6, 9)
        assert body["cached_tokens"] == cached
        assert body["planned"] is None  # a view from the store knows no live plan
    # a caller holding the live session's plan gets it priced in the same JSON
    plan = WarmPlan(
        action="seal",
        at=last.started_at + 270,
        ttl="1h",
        covers_until=last.started_at + 3870,
        cost=1_000.0,
        saves=9_000.0,
        chance=0.5,
        reason="seal: keeps it warm",
    )
    planned = usage_view(view, plan)["planned"]
    assert planned == {
        "action": "seal",
        "at": last.started_at + 270,
        "covers_until": last.started_at + 3870,
        "cost_usd": 1_000 * 3.0 / 1e6,  # base-input tokens at $3/M
        "reason": "seal: keeps it warm",
    }


async def test_an_implicit_cache_holds_the_whole_input_it_saw(tmp_path: Path) -> None:
    (real,) = await _one_turn(tmp_path, FrozenClock())
    # OpenAI reports no write: a first call of 3,000 tokens is all "uncached", yet cached.
    first = replace(real, model="gpt-4.1", breakpoints=(), usage=Usage(uncached=3000, output=100))
    found = cache_clock([first], model_info("gpt-4.1"))  # $2 input, $0.50 read
    assert found.cached_tokens == 3000
    assert found.new_tokens == 100
    assert found.warm_until == first.started_at + 300
    assert round(found.next_cost_now or 0, 9) == round((3000 * 0.50 + 100 * 2.0) / 1e6, 9)
    assert round(found.next_cost_cold or 0, 9) == round(3100 * 2.0 / 1e6, 9)


async def test_after_a_switch_to_another_model_nothing_is_read(tmp_path: Path) -> None:
    (real,) = await _one_turn(tmp_path, FrozenClock())
    other = model_info("claude-haiku-4-5")
    found = cache_clock([real], other)
    assert found.warm_until is None
    assert found.next_cost_now == found.next_cost_cold
    assert found.new_tokens == real.usage.input_total + real.usage.output
    assert "the next message goes to claude-haiku-4-5" in found.lines(real.started_at)[0]


async def test_the_gateway_prices_the_keep_warm_it_plans_for_a_live_session(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "gw.db") as store:
        rig = make_rig(store, keep_warm=True)
        async with client(rig) as c:
            sid = (await c.post("/v1/sessions", json={}, headers=auth("alice"))).json()["id"]
            sent = await c.post(
                f"/v1/sessions/{sid}/messages", json={"text": "hello"}, headers=auth("alice")
            )
            assert sent.status_code == 200, sent.text
            history = (await c.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()
            plan = rig.gateway.planned_keep_warm(sid)
        await rig.gateway.close()
    assert plan is not None  # the gateway holds the session live, with keep-warm on
    assert history["planned"] is not None
    assert history["planned"]["action"] == plan.action
    assert history["planned"]["at"] == plan.at
    assert history["planned"]["cost_usd"] == plan.cost * 3.0 / 1e6  # base-input at $3/M
