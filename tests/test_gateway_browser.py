"""The dashboard in a real browser: headless Chromium, driven over the W3C WebDriver
protocol (plain HTTP to chromedriver, so no driver library and nothing downloaded).

The gateway runs on a free loopback port; the page is opened first, a message is sent
through the API, and the page's chart must grow a bar for the new request by itself.
Needs Debian's `chromium` and `chromium-driver`: skipped without them, failed in CI.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from stoker.cache.models import model_info
from stoker.cache.pricing import uncached_cost_usd
from stoker.gateway.auth import TokenTable, token_digest
from stoker.gateway.config import GatewayConfig
from stoker.gateway.local import local_gateway
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.gateway.session_settings import SessionSettings
from stoker.store.sqlite import SQLiteStore
from stoker.wire.figures import RATIO_PLACES
from stoker.wire.usage import Usage
from tests.helpers import SYSTEM
from tests.test_gateway_support import make_rig

CHROMIUM = os.environ.get("STOKER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("STOKER_CHROMEDRIVER", "/usr/bin/chromedriver")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def _browser_or_skip() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        message = (
            f"headless browser test needs {', '.join(missing)} (apt: chromium chromium-driver)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class WebDriver:
    """The four WebDriver calls this test needs."""

    def __init__(self, base: str, user_data: Path) -> None:
        self.http = httpx.Client(base_url=base, timeout=30)
        options = {"binary": CHROMIUM, "args": [*ARGS, f"--user-data-dir={user_data}"]}
        caps = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
        r = self.http.post("/session", json={"capabilities": caps})
        r.raise_for_status()
        self.session = r.json()["value"]["sessionId"]

    def go(self, url: str) -> None:
        self.http.post(f"/session/{self.session}/url", json={"url": url}).raise_for_status()

    def run(self, script: str) -> Any:
        r = self.http.post(
            f"/session/{self.session}/execute/sync", json={"script": script, "args": []}
        )
        r.raise_for_status()
        return r.json()["value"]

    def quit(self) -> None:
        self.http.delete(f"/session/{self.session}")
        self.http.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    _browser_or_skip()
    port = _free_port()
    log = (tmp_path / "chromedriver.log").open("w")
    driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: _ready(base), "chromedriver")
        web = WebDriver(base, tmp_path / "chromium-profile")
        try:
            yield web
        finally:
            web.quit()
    finally:
        driver.terminate()
        driver.wait(10)
        log.close()


def _ready(base: str) -> bool:
    try:
        return bool(httpx.get(base + "/status", timeout=1).json()["value"]["ready"])
    except (httpx.TransportError, ValueError, KeyError):
        return False


def test_the_dashboard_charts_a_new_request_as_it_happens(browser: WebDriver) -> None:
    with (
        local_gateway() as (url, token),
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as api,
    ):
        sid = api.post("/v1/sessions", json={}).json()["id"]
        browser.go(f"{url}/ui#token={token}&session={sid}")
        _until(
            lambda: browser.run("return document.getElementById('status').textContent").startswith(
                "updated"
            ),
            "the page's first poll",
        )
        assert browser.run("return location.hash") == ""  # the token left the address bar
        assert browser.run("return document.querySelectorAll('#chart [data-request]').length") == 0

        api.post(f"/v1/sessions/{sid}/messages", json={"text": "hello from the API"})

        bars = _until(
            lambda: browser.run(
                "return Array.from(document.querySelectorAll('#chart [data-request]'))"
                ".map(g => [g.dataset.request, g.dataset.verdict,"
                " g.querySelectorAll('rect').length])"
            ),
            "a bar for the new request",
        )
        assert bars == [["0", "below_minimum", 3]]  # the default prompt is short
        assert browser.run("return document.getElementById('chart').dataset.count") == "1"
        rows = browser.run("return document.querySelectorAll('#requests tr').length")
        assert rows == 1
        listed = browser.run(
            "return Array.from(document.querySelectorAll('#sessions [data-session]'))"
            ".map(b => b.dataset.session)"
        )
        assert listed == [sid]


def _stored_conversation(db: Path) -> tuple[str, str]:
    """Two sessions of alice on a frozen clock, keep-warm off: a tool turn, a hit a minute
    later, a 7-minute gap (the 5-minute entry expires: a miss), a declared model switch
    to a model with no price in the table, then a 3-hour gap (another miss). Returns (the
    first session's id, the other's)."""

    async def write() -> tuple[str, str]:
        async with SQLiteStore(db) as store:
            rig = make_rig(store, keep_warm=False)
            gw = rig.gateway
            try:
                sid = await gw.create_session("alice")
                await gw.send("alice", sid, "read_file 'notes.md'")
                rig.clock.advance(minutes=1)
                await gw.send("alice", sid, "and then?")
                rig.clock.advance(minutes=7)
                await gw.send("alice", sid, "still there?")
                await gw.send("alice", sid, "/model claude-mythos-5-1")
                rig.clock.advance(seconds=20)
                await gw.send("alice", sid, "with the other model")
                rig.clock.advance(minutes=180)
                await gw.send("alice", sid, "back after three hours")
                other = await gw.create_session("alice")
                await gw.send("alice", other, "a second conversation")
            finally:
                await gw.close()
            return sid, other

    return asyncio.run(write())


@contextmanager
def _gateway_on(db: Path) -> Iterator[tuple[str, str]]:
    """A gateway over the stored conversation, as a restarted process would serve it."""
    token = "alice-dashboard-token-0001"
    config = GatewayConfig(
        tokens=TokenTable({token_digest(token): "alice"}),
        keep_warm=False,
        defaults=SessionSettings(system=SYSTEM),
    )
    app = build_app(config, build_gateway(config, store=SQLiteStore(db)))
    with serve_in_thread(app) as url:
        yield url, token


def _no_cache_usd(request: dict[str, Any]) -> float | None:
    return uncached_cost_usd(Usage.from_dict(request["usage"]), model_info(request["model"]))


def test_the_dashboard_shows_savings_a_time_axis_and_misses_apart(
    browser: WebDriver, tmp_path: Path
) -> None:
    sid, other = _stored_conversation(tmp_path / "gw.db")
    with (
        _gateway_on(tmp_path / "gw.db") as (url, token),
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as api,
    ):
        usage = api.get(f"/v1/sessions/{sid}/usage").json()
        second = api.get(f"/v1/sessions/{other}/usage").json()
        browser.go(f"{url}/ui#token={token}&session={sid}")
        _until(
            lambda: browser.run("return document.getElementById('chart').dataset.count") == "6",
            "the session's six requests",
        )
        page = browser.run(
            """const d = (id) => document.getElementById(id);
            return {saved: +d('saved').dataset.usd, savedText: d('saved').textContent,
              cost: +d('cost').dataset.usd, noCache: +d('no-cache').dataset.usd,
              ratio: +d('hit-ratio').dataset.ratio, unpriced: +d('unpriced').dataset.count,
              title: d('title').textContent,
              listed: Array.from(document.querySelectorAll('#sessions [data-session]'))
                .map(b => [b.dataset.session, b.firstChild.textContent]),
              totals: {...d('user-totals').dataset}}"""
        )
        bars = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-request]')).map(g => ["
            "g.dataset.kind, g.dataset.verdict, +g.dataset.started, +g.dataset.x,"
            " Array.from(g.querySelectorAll('[data-mark]')).map(m => m.dataset.mark).join()])"
        )
        expired_after = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-expired-after]'))"
            ".map(e => +e.dataset.expiredAfter)"
        )
        bands = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-ttl-band]'))"
            ".map(b => [+b.dataset.ttlBand, +b.getAttribute('x') + +b.getAttribute('width')])"
        )
        breaks = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-gap-break]'))"
            ".map(b => [+b.dataset.gapBreak, b.textContent])"
        )
        ticks = browser.run(
            "return Array.from(document.querySelectorAll('#chart [data-tick]'))"
            ".map(t => +t.dataset.time)"
        )

    requests = usage["requests"]
    priced = [r for r in requests if r["cost_usd"] is not None]
    unpriced = len(requests) - len(priced)
    # the savings figure: the records' own totals, and the unpriced call kept apart
    assert unpriced == 2  # the switch went to a model the price table does not know
    assert page["unpriced"] == unpriced
    assert page["cost"] == pytest.approx(sum(r["cost_usd"] for r in priced))
    no_cache = sum(_no_cache_usd(r) or 0.0 for r in priced)
    assert page["noCache"] == pytest.approx(no_cache)
    assert page["saved"] == pytest.approx(no_cache - page["cost"])
    assert page["saved"] > 0
    assert page["savedText"] == f"${page['saved']:.6f}"
    read = sum(r["usage"]["read"] for r in requests)
    # the ratio as the JSON carries it: RATIO_PLACES decimal places, not float noise
    exact = read / sum(r["usage"]["input_total"] for r in requests)
    assert page["ratio"] == usage["spend"]["hit_ratio"] == round(exact, RATIO_PLACES)
    # across alice's sessions
    assert page["totals"]["sessions"] == "2"
    both = usage["spend"]["savings_usd"] + second["spend"]["savings_usd"]
    assert float(page["totals"]["savingsUsd"]) == pytest.approx(both)
    assert page["totals"]["unpriced"] == "2"
    # titled by the first message, in the heading and the list
    assert page["title"] == "read_file 'notes.md'"
    assert dict(page["listed"]) == {sid: "read_file 'notes.md'", other: "a second conversation"}

    # misses and declared breaks apart, and only they are marked
    assert [(kind, verdict, mark) for kind, verdict, _, _, mark in bars] == [
        (
            r["kind"],
            r["explanation"]["verdict"],
            r["kind"] if r["kind"] in ("miss", "declared") else "",
        )
        for r in requests
    ]
    kinds = [b[0] for b in bars]
    assert kinds == ["first", "hit", "hit", "miss", "declared", "miss"]
    assert bars[3][1] == bars[5][1] == "expired"
    # the time axis: left to right in time, gaps drawn to scale, the expiry between them
    starts = [b[2] for b in bars]
    assert starts == [r["started_at"] for r in requests]
    xs = [b[3] for b in bars]
    assert xs == sorted(xs)
    assert len(set(xs)) == len(xs)
    one_minute, seven_minutes = xs[2] - xs[1], xs[3] - xs[2]
    assert seven_minutes > 4 * one_minute
    assert expired_after == [2, 4]  # only these gaps outlived the 5-minute entry
    assert breaks == [[5, "≈ 3.0 h"]]  # past the axis's reach: cut, with its length
    assert xs[5] - xs[4] < 2 * seven_minutes  # ...so it does not squash the rest
    band_end = dict(bands)
    assert band_end[2] < xs[3]  # the entry's life ends before the next request
    assert band_end[1] == pytest.approx(xs[2], abs=0.01)  # a minute later still alive
    assert ticks
    assert set(ticks) <= set(starts)
    assert ticks[0] == starts[0]
