"""`GET /v1/sessions/{sid}/events`: the stored log as pages or a followed SSE stream, the
operator's prompt kept out of it, resumable with Last-Event-ID, never a 500."""

from __future__ import annotations

import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.store.base import SqlEventStore
from tests.helpers import SYSTEM
from tests.test_gateway_support import auth, client, make_rig, sse_events


async def _one_turn(c: httpx.AsyncClient) -> str:
    sid = str((await c.post("/v1/sessions", json={}, headers=auth("alice"))).json()["id"])
    await c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}, headers=auth("alice"))
    return sid


async def test_events_are_the_stored_log_without_the_operators_prompt(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        sid = await _one_turn(c)
        page = await c.get(f"/v1/sessions/{sid}/events", headers=auth("alice"))
        later = await c.get(f"/v1/sessions/{sid}/events?after=1&limit=2", headers=auth("alice"))
        foreign = await c.get(f"/v1/sessions/{sid}/events", headers=auth("bob"))
    events = page.json()["events"]
    stored = await store.events(sid)
    assert [(e["seq"], e["type"]) for e in events] == [(s, t) for s, t, _, _ in stored]
    assert events[0]["data"] is None  # the creation holds the system prompt: not shown
    assert SYSTEM[:60] not in page.text
    user = next(e for e in events if e["type"] == "message_appended")
    assert user["data"]["message"]["content"][0]["text"] == "hi"
    record = next(e for e in events if e["type"] == "cache_recorded")
    assert record["data"]["usage"]["input_total"] > 0
    assert [e["seq"] for e in later.json()["events"]] == [2, 3]
    assert foreign.status_code == 404


async def test_a_followed_stream_ends_after_its_timeout_and_resumes_by_last_event_id(
    store: SqlEventStore,
) -> None:
    async with client(make_rig(store)) as c:
        sid = await _one_turn(c)
        total = len(await store.events(sid))
        path = f"/v1/sessions/{sid}/events?stream=true&timeout=1"
        whole = await c.get(path, headers=auth("alice"))
        resumed = await c.get(path, headers={**auth("alice"), "Last-Event-ID": str(total - 1)})
    frames = sse_events(whole.text)
    assert [json.loads(d)["seq"] for _, d in frames[:-1]] == list(range(1, total + 1))
    assert frames[-1] == ("end", json.dumps({"after": total}, separators=(",", ":")))
    assert "id: 1\n" in whole.text
    assert [json.loads(d)["seq"] for _, d in sse_events(resumed.text)[:-1]] == [total]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.dictionaries(
        st.sampled_from(["after", "limit", "timeout", "stream"]), st.text(max_size=12), max_size=3
    ),
    resume=st.none() | st.text(max_size=12),
)
async def test_any_query_is_answered_without_a_500(
    store: SqlEventStore, query: dict[str, str], resume: str | None
) -> None:
    rig = make_rig(store)
    query = {**query, "timeout": "1"} if "stream" in query else query
    headers = auth("alice") | ({"Last-Event-ID": resume} if resume is not None else {})
    async with client(rig) as c:
        sid = (await c.post("/v1/sessions", json={}, headers=auth("alice"))).json()["id"]
        try:
            got = await c.get(f"/v1/sessions/{sid}/events", params=query, headers=headers)
        except UnicodeEncodeError:
            return  # httpx cannot send such a header at all
    assert got.status_code in (200, 400), got.text
    if got.status_code == 400:
        assert got.json()["error"]["type"] == "invalid_request"
