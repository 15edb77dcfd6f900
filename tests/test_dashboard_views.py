"""What the dashboard is fed: money totals that an unknown price never hides, each call's
kind (a miss apart from a declared break), and a user's totals that hold only their own
sessions."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.cache.models import model_info
from stoker.cache.pricing import cost_usd, uncached_cost_usd
from stoker.gateway.views import request_kind
from stoker.session_views import Spend
from stoker.store.base import SqlEventStore
from stoker.wire.record import CacheRecord, Explanation, Verdict
from stoker.wire.usage import Usage
from tests.test_gateway_support import auth, client, make_rig

SONNET = model_info("claude-sonnet-4-6")

_usage = st.builds(
    Usage,
    uncached=st.integers(0, 10_000),
    written_5m=st.integers(0, 10_000),
    written_1h=st.integers(0, 10_000),
    read=st.integers(0, 100_000),
    output=st.integers(0, 5_000),
)


def _record(usage: Usage, *, priced: bool, model: str = "claude-sonnet-4-6") -> CacheRecord:
    return CacheRecord(
        session_id="s",
        seq=1,
        role="main",
        provider="sim",
        model=model,
        started_at=0.0,
        fingerprints=None,  # type: ignore[arg-type]  # not read by the totals
        breakpoints=(),
        usage=usage,
        cost_usd=cost_usd(usage, SONNET) if priced else None,
    )


@given(calls=st.lists(st.tuples(_usage, st.booleans()), max_size=12))
def test_unpriced_calls_are_counted_apart_and_never_hide_the_priced_totals(
    calls: list[tuple[Usage, bool]],
) -> None:
    records = [_record(u, priced=p) for u, p in calls]
    spend = Spend.of(records)
    priced = [u for u, p in calls if p]
    assert spend.calls == len(calls)
    assert spend.unpriced == len(calls) - len(priced)
    assert spend.usage == Usage.total(u for u, _ in calls)
    assert spend.cost_usd == pytest.approx(sum(cost_usd(u, SONNET) or 0.0 for u in priced))
    no_cache = sum(uncached_cost_usd(u, SONNET) or 0.0 for u in priced)
    assert spend.no_cache_usd == pytest.approx(no_cache)
    # negative when writes outweigh reads: a saving is shown as it is, never clipped
    assert spend.savings_usd == pytest.approx(no_cache - spend.cost_usd)
    assert spend.to_dict()["unpriced_calls"] == spend.unpriced


def test_a_call_on_a_model_stoker_does_not_know_is_unpriced_not_an_error() -> None:
    usage = Usage(uncached=10, read=1000, output=5)
    known = _record(usage, priced=True)
    stranger = dataclasses.replace(known, model="someone-elses-model", cost_usd=0.5)
    spend = Spend.of([known, stranger])
    assert spend.unpriced == 1
    assert spend.cost_usd == known.cost_usd


def test_every_verdict_has_one_kind_and_misses_are_the_undeliberate_ones() -> None:
    kinds = {
        v: request_kind(
            dataclasses.replace(_record(Usage(), priced=True), explanation=Explanation(verdict=v))
        )
        for v in get_args(Verdict)
    }
    assert kinds == {
        "first": "first",
        "hit": "hit",
        "declared": "declared",
        "kept_warm": "keep_warm",
        "below_minimum": "uncacheable",
        "no_breakpoint": "uncacheable",
        **{
            v: "miss"
            for v in (
                "diverged",
                "expired",
                "lookback",
                "concurrent",
                "evicted",
                "cold",
                "overflow",
                "unexplained",
                "rerouted",
            )
        },
    }


async def test_a_users_totals_hold_their_sessions_only(store: SqlEventStore) -> None:
    rig = make_rig(store)
    async with client(rig) as c:
        ids = []
        for user, text in (("alice", "hello"), ("alice", "read_file 'a.md'"), ("bob", "hi")):
            r = await c.post("/v1/sessions", json={}, headers=auth(user))
            ids.append((user, r.json()["id"]))
            sent = await c.post(
                f"/v1/sessions/{ids[-1][1]}/messages", json={"text": text}, headers=auth(user)
            )
            assert sent.status_code == 200
        per_session = {
            sid: (await c.get(f"/v1/sessions/{sid}/usage", headers=auth(user))).json()
            for user, sid in ids
        }
        alice = (await c.get("/v1/usage", headers=auth("alice"))).json()
        bob = (await c.get("/v1/usage", headers=auth("bob"))).json()
        limited = await c.get("/v1/usage?limit=1", headers=auth("alice"))
        bad = await c.get("/v1/usage?limit=0", headers=auth("alice"))
        anonymous = await c.get("/v1/usage")
    mine = [per_session[sid]["spend"] for user, sid in ids if user == "alice"]
    assert alice["sessions"] == 2
    assert alice["spend"]["calls"] == sum(s["calls"] for s in mine)
    assert alice["spend"]["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in mine))
    assert alice["spend"]["savings_usd"] == pytest.approx(sum(s["savings_usd"] for s in mine))
    assert bob["sessions"] == 1
    assert bob["spend"] == per_session[ids[2][1]]["spend"]
    assert limited.json()["sessions"] == 1
    assert bad.status_code == 400
    assert anonymous.status_code == 401


async def test_usage_names_the_session_by_its_first_message(store: SqlEventStore) -> None:
    rig = make_rig(store)
    async with client(rig) as c:
        sid = (await c.post("/v1/sessions", json={}, headers=auth("alice"))).json()["id"]
        empty = (await c.get(f"/v1/sessions/{sid}/usage", headers=auth("alice"))).json()
        for text in ("first words", "second words"):
            await c.post(f"/v1/sessions/{sid}/messages", json={"text": text}, headers=auth("alice"))
        usage = (await c.get(f"/v1/sessions/{sid}/usage", headers=auth("alice"))).json()
    assert empty["title"] == ""
    assert usage["title"] == "first words"
    assert [r["ttl_seconds"] > 0 for r in usage["requests"]] == [True] * len(usage["requests"])
