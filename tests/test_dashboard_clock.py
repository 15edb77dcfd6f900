"""The dashboard's session page shows the cache clock, in headless Chromium: how long the
prefix stays cached and what the next message costs now and after expiry, the same
figures the session's JSON holds (`warm_until`, `next_cost_now`, `next_cost_cold`)."""

from __future__ import annotations

from pathlib import Path

import httpx

from stoker.agent.cache_clock import money
from tests.test_gateway_browser import WebDriver, _gateway_on, _until, browser

__all__ = ["browser"]  # the fixture, shared with the dashboard's other browser tests


def test_the_session_page_shows_the_cache_clock(browser: WebDriver, tmp_path: Path) -> None:
    with (
        _gateway_on(tmp_path / "gw.db") as (url, token),  # the system clock: the entry is warm
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as api,
    ):
        sid = api.post("/v1/sessions", json={}).json()["id"]
        assert api.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"}).status_code == 200
        usage = api.get(f"/v1/sessions/{sid}/usage").json()
        browser.go(f"{url}/ui#token={token}&session={sid}")
        _until(
            lambda: (
                browser.run("return document.getElementById('cache-clock').dataset.warm") == "true"
            ),
            "the warm cache clock",
        )
        shown = browser.run(
            """const c = document.getElementById('cache-clock');
            return {text: c.textContent, ...c.dataset}"""
        )
    assert usage["warm_until"] is not None
    assert usage["next_cost_now"] < usage["next_cost_cold"]
    assert float(shown["warmUntil"]) == usage["warm_until"]
    assert float(shown["nowUsd"]) == usage["next_cost_now"]
    assert float(shown["coldUsd"]) == usage["next_cost_cold"]
    text = shown["text"]
    assert f"{usage['cached_tokens']:,} tokens warm until" in text
    assert "min left" in text  # a 5-minute entry, just written
    assert f"input {money(usage['next_cost_now'])} now" in text
    assert f"{money(usage['next_cost_cold'])} after expiry" in text
