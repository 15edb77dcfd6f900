"""Approvals in the HTTP gateway, on a real server: a streamed message's risky call waits
for an `approval` answered by `POST .../approvals/{id}`; another user, a second answer,
an expired or unknown id and a bad body each get their error; the wait costs no cache
read; a message that is not streamed is denied at once. Every decision is stored."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.gateway.app import create_app
from stoker.gateway.server import serve_in_thread
from stoker.store.sqlite import SQLiteStore
from stoker.tools import ToolRegistry
from stoker.toolsets.workspace import workspace_toolset
from tests.hostile_http import encode, json_values
from tests.test_gateway_support import Rig, auth, make_rig, tokens

ASK = "add_note 'ship on friday'"


@dataclass
class Served:
    url: str
    rig: Rig
    workdir: Path

    def client(self, user: str = "alice") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=auth(user), timeout=30)

    def session(self) -> str:
        with self.client() as c:
            return str(c.post("/v1/sessions", json={}).json()["id"])


@contextmanager
def serve(tmp_path: Path, *, timeout: float = 240.0) -> Iterator[Served]:
    store = SQLiteStore(tmp_path / "gw.db")
    registry = ToolRegistry([workspace_toolset(tmp_path)])
    rig = make_rig(store, registry=registry, approval_timeout=timeout, keep_warm=False)
    app = create_app(rig.gateway, tokens=tokens(), close_store=True)
    with serve_in_thread(app) as url:
        yield Served(url=url, rig=rig, workdir=tmp_path)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path) as s:
        yield s


def _frames(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) of each SSE frame as it arrives."""
    event, data = "", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and data:
            yield event, json.loads(data)
            event, data = "", ""


def _streamed(
    served: Served, sid: str, text: str, on_approval: Any
) -> list[tuple[str, dict[str, Any]]]:
    """Every event of a streamed message; `on_approval(event data)` runs on each
    `approval` event, in another thread, while the stream stays open."""
    seen: list[tuple[str, dict[str, Any]]] = []
    helpers: list[threading.Thread] = []
    with (
        served.client() as c,
        c.stream("POST", f"/v1/sessions/{sid}/messages?stream=true", json={"text": text}) as r,
    ):
        assert r.status_code == 200
        for event, data in _frames(r):
            seen.append((event, data))
            if event == "approval":
                helper = threading.Thread(target=on_approval, args=(data,))
                helper.start()
                helpers.append(helper)
    for helper in helpers:
        helper.join(10)
    return seen


def _answer(served: Served, sid: str, approval_id: str, user: str = "alice", **body: Any) -> Any:
    with served.client(user) as c:
        return c.post(f"/v1/sessions/{sid}/approvals/{approval_id}", json=body)


def _decisions(served: Served, sid: str) -> list[dict[str, Any]]:
    with served.client() as c:
        events = c.get(f"/v1/sessions/{sid}/events").json()["events"]
    return [e["data"] for e in events if e["type"] == "approval_decided"]


def test_the_owner_approves_a_waiting_call_after_another_user_is_refused(served: Served) -> None:
    sid = served.session()
    answers: dict[str, Any] = {}

    def approve(event: dict[str, Any]) -> None:
        answers["bob"] = _answer(served, sid, event["id"], "bob", decision="approve")
        answers["alice"] = _answer(served, sid, event["id"], decision="approve", reason="ok")
        answers["again"] = _answer(served, sid, event["id"], decision="deny")

    seen = _streamed(served, sid, ASK, approve)
    ((approval_id, approval),) = [(d["id"], d) for e, d in seen if e == "approval"]
    assert approval == {
        "id": approval_id,
        "tool": "add_note",
        "tool_use_id": approval["tool_use_id"],
        "arguments": {"text": "ship on friday"},
        "summary": 'add_note(text="ship on friday")',
        "expires_at": served.rig.clock.now() + 240.0,
    }
    bob = answers["bob"]
    assert bob.status_code == 404
    assert bob.json()["error"]["type"] == "not_found"
    at = served.rig.clock.now()
    assert answers["alice"].status_code == 200
    assert answers["alice"].json() == {
        "id": approval_id,
        "approved": True,
        "by": "user:alice",
        "reason": "ok",
        "at": at,
    }
    again = answers["again"]
    assert again.status_code == 409
    assert again.json() == {
        "error": {
            "type": "conflict",
            "message": f"approval {approval_id!r} was already approved by user:alice",
        }
    }
    assert seen[-1][0] == "done"
    assert seen[-1][1]["text"] == "Done. Tool results: noted in NOTES.md"
    assert (served.workdir / "NOTES.md").read_text() == "- ship on friday\n"
    assert _decisions(served, sid) == [
        {
            "tool": "add_note",
            "tool_use_id": approval["tool_use_id"],
            "summary": 'add_note(text="ship on friday")',
            "approved": True,
            "by": "user:alice",
            "reason": "ok",
            "at": at,
        }
    ]


def test_a_denial_reaches_the_model_and_the_tool_does_not_run(served: Served) -> None:
    sid = served.session()
    seen = _streamed(
        served,
        sid,
        ASK,
        lambda event: _answer(served, sid, event["id"], decision="deny", reason="not today"),
    )
    assert seen[-1][1]["text"].startswith(
        "Done. Tool results: the user denied add_note (user:alice): not today."
    )
    assert not (served.workdir / "NOTES.md").exists()
    ((tool_end,),) = [[d for e, d in seen if e == "tool" and d["phase"] == "end"]]
    assert tool_end["error"] is True
    assert [(d["approved"], d["by"]) for d in _decisions(served, sid)] == [(False, "user:alice")]


def test_waiting_two_minutes_for_an_approval_costs_no_cache_miss(served: Served) -> None:
    sid = served.session()

    def later(event: dict[str, Any]) -> None:
        served.rig.clock.advance(120)
        _answer(served, sid, event["id"], decision="approve")

    _streamed(served, sid, ASK, later)
    with served.client() as c:
        calls = c.get(f"/v1/sessions/{sid}/usage").json()["requests"]
    first, second = calls
    assert [q["explanation"]["verdict"] for q in calls] == ["first", "hit"]
    assert second["started_at"] - first["started_at"] == 120
    assert second["usage"]["read"] == first["usage"]["read"] + first["usage"]["written"]
    assert second["usage"]["uncached"] == 0


def test_an_approval_nobody_answers_expires_and_denies(tmp_path: Path) -> None:
    with serve(tmp_path, timeout=0.3) as served:
        sid = served.session()
        seen = _streamed(served, sid, ASK, lambda event: None)
        (approval_id,) = [d["id"] for e, d in seen if e == "approval"]
        assert seen[-1][1]["text"].startswith(
            "Done. Tool results: add_note was not approved (timeout): no answer within 0.3 seconds."
        )
        late = _answer(served, sid, approval_id, decision="approve")
        assert late.status_code == 409
        assert "expired" in late.json()["error"]["message"]
        assert [(d["approved"], d["by"]) for d in _decisions(served, sid)] == [(False, "timeout")]
        assert not (tmp_path / "NOTES.md").exists()


def test_a_message_that_is_not_streamed_denies_at_once(served: Served) -> None:
    sid = served.session()
    with served.client() as c:
        reply = c.post(f"/v1/sessions/{sid}/messages", json={"text": ASK}).json()
    assert reply["text"].startswith("Done. Tool results: add_note was not approved (no approver)")
    assert [(d["approved"], d["by"], d["at"]) for d in _decisions(served, sid)] == [
        (False, "no approver", served.rig.clock.now())
    ]


def test_unknown_ids_and_other_users_sessions_are_404(served: Served) -> None:
    sid = served.session()
    unknown = _answer(served, sid, "a" * 22, decision="approve")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"].startswith(f"no approval {'a' * 22!r} is waiting")
    foreign = _answer(served, sid, "a" * 22, "bob", decision="approve")
    assert foreign.status_code == 404
    assert foreign.json()["error"]["message"] == f"no session {sid!r}"


VALID = {"decision": "approve"}
bodies = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["decision", "reason", "extra"]), json_values, max_size=3),
    st.builds(lambda v: {**VALID, "reason": v}, json_values),
    st.builds(lambda v: {"decision": v}, json_values),
)


def _valid(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and set(body) <= {"decision", "reason"}
        and body.get("decision") in ("approve", "deny")
        and (body.get("reason") is None or (isinstance(body["reason"], str)))
        and len(body.get("reason") or "") <= 1000
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=bodies)
def test_generated_bodies_are_a_400_unless_valid_then_the_unknown_id_is_a_404(
    served: Served, body: Any
) -> None:
    with served.client() as c:
        r = c.post(
            f"/v1/sessions/{'b' * 32}/approvals/{'a' * 22}",
            content=encode(body),
            headers={"Content-Type": "application/json"},
        )
    assert r.status_code == (404 if _valid(body) else 400), (body, r.text)
    assert set(r.json()) == {"error"}
