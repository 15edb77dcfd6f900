"""The dashboard in a real browser: headless Chromium, driven over the W3C WebDriver
protocol (plain HTTP to chromedriver, so no driver library and nothing downloaded).

The gateway runs on a free loopback port; the page is opened first, a message is sent
through the API, and the page's chart must grow a bar for the new request by itself.
Needs Debian's `chromium` and `chromium-driver`: skipped without them, failed in CI.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stoker.gateway.local import local_gateway

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
