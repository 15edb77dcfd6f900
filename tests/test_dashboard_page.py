"""The dashboard as a newcomer meets it, in headless Chromium: a sign-in page that says
where the token comes from, a chart as wide as its column whose time labels each say
something new, and the conversation itself beside the figures."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from stoker.store.sqlite import SQLiteStore
from tests.test_gateway_browser import WebDriver, _gateway_on, _stored_conversation, _until, browser
from tests.test_gateway_support import make_rig

__all__ = ["browser"]  # the fixture, shared with the dashboard's other browser tests

BURST = 8  # messages sent at one instant: more bars than the axis has labels for


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    db: Path
    sid: str  # six requests over three hours: misses, a declared break
    other: str  # one message, one request
    burst: str  # BURST messages at one instant


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """The browser tests' stored conversation (two sessions), and a session of BURST
    messages sent at one instant (the rig's clock is frozen)."""
    db = tmp_path_factory.mktemp("dashboard") / "gw.db"
    sid, other = _stored_conversation(db)

    async def burst() -> str:
        async with SQLiteStore(db) as store:
            gw = make_rig(store, keep_warm=False).gateway
            try:
                at_once = await gw.create_session("alice")
                for n in range(BURST):
                    await gw.send("alice", at_once, f"message {n}")
            finally:
                await gw.close()
            return at_once

    return Stored(db=db, sid=sid, other=other, burst=asyncio.run(burst()))


def _open(browser: WebDriver, url: str, token: str, sid: str, count: int) -> None:
    # a query of its own: a change of the fragment alone would not load the page again
    browser.go(f"{url}/ui?open={sid}#token={token}&session={sid}")
    _until(
        lambda: browser.run("return document.getElementById('chart').dataset.count") == str(count),
        f"the session's {count} requests",
    )


def test_the_sign_in_page_says_where_the_token_comes_from(
    browser: WebDriver, stored: Stored
) -> None:
    with _gateway_on(stored.db) as (url, _token):
        browser.go(f"{url}/ui")
        _until(lambda: browser.run("return !document.getElementById('login').hidden"), "sign-in")
        said = " ".join(browser.run("return document.getElementById('login').innerText").split())
        for phrase in (
            "Authorization: Bearer TOKEN",
            "[[users]]",
            "token_sha256",
            "stoker serve",
            "stays in this browser tab",
        ):
            assert phrase in said
        browser.run(
            "document.getElementById('token').value = 'not-a-token';"
            "document.getElementById('login').requestSubmit();"
        )
        problem = _until(
            lambda: browser.run(
                "const e = document.getElementById('login-error');"
                "return !document.getElementById('login').hidden && !e.hidden && e.textContent"
            ),
            "the rejected token's message",
        )
        assert "does not know that token" in problem


def test_the_chart_fills_its_column_and_no_two_time_labels_are_alike(
    browser: WebDriver, stored: Stored
) -> None:
    db, sid, at_once = stored.db, stored.sid, stored.burst
    rect = {"width": 1400, "height": 1000}
    browser.http.post(f"/session/{browser.session}/window/rect", json=rect).raise_for_status()
    with _gateway_on(db) as (url, token):
        _open(browser, url, token, at_once, BURST)
        widths = browser.run(
            "const c = document.getElementById('chart');"
            "return [c.getBoundingClientRect().width, c.parentElement.clientWidth]"
        )
        labels = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-tick]'))"
            ".map(t => t.textContent)"
        )
        _open(browser, url, token, sid, 6)
        spread = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-tick]'))"
            ".map(t => t.textContent)"
        )
    chart, column = widths
    assert column > 1000  # the window is wide...
    assert chart >= column - 4  # ...and the chart takes the whole column
    assert len(labels) == 1  # one instant, one label
    assert len(spread) > 1  # requests minutes apart get one each
    assert len(set(spread)) == len(spread)


def test_the_page_shows_the_conversation(browser: WebDriver, stored: Stored) -> None:
    db, sid = stored.db, stored.sid
    with (
        _gateway_on(db) as (url, token),
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as api,
    ):
        turns = api.get(f"/v1/sessions/{sid}").json()["turns"]
        _open(browser, url, token, sid, 6)
        shown = _until(
            lambda: browser.run(
                "return Array.from(document.querySelectorAll('#transcript li[data-turn]'))"
                ".map(li => Array.from(li.querySelectorAll('p')).map(p => [p.className,"
                " p.textContent]))"
            ),
            "the transcript",
        )
    expected = [
        [
            ["you", t["user"]],
            *([["tools", "tools: " + ", ".join(t["tools"])]] if t["tools"] else []),
            ["answer", t["answer"]],
        ]
        for t in turns
    ]
    assert shown == expected
    assert shown[0][:2] == [["you", "read_file 'notes.md'"], ["tools", "tools: read_file"]]
    assert len(shown) == 5


def test_the_page_counts_in_the_number_of_its_nouns(browser: WebDriver, stored: Stored) -> None:
    with _gateway_on(stored.db) as (url, token):
        _open(browser, url, token, stored.other, 1)
        line = browser.run("return document.getElementById('session-id').textContent")
        listed = browser.run(
            "return Array.from(document.querySelectorAll('#sessions small'))"
            ".map(s => s.textContent)"
        )
    assert "· 1 request" in line
    assert "1 requests" not in line
    assert any("· 2 messages ·" in s for s in listed)
    assert not any(" 1 messages" in s for s in listed)
