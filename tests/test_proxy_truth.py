"""`stoker report-proxy` tells the story the provider's own usage tells.

Each test here failed on the proxy as it was before: verdicts and misses that the shadow
accountant made up where the provider reported a full read (an OpenAI overflow that did
not happen), a lineage joined across wires and model families, a request with no
breakpoint called "below the minimum", a report with no dollar figures and a line per
added breakpoint, and a keep-warm that only ever pinged where a seal was cheaper.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from stoker.cache.accounting import OpenAISettings
from stoker.cache.accounting.openai import OpenAIAccountant
from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.server import create_app, serve_in_background
from stoker.proxy import ProxyConfig, proxy_report
from stoker.proxy import create_app as create_proxy
from stoker.store.sqlite import SQLiteStore
from stoker.wire.exchange import Exchange
from tests.proxy_helpers import SYSTEM, TOOLS, behind_proxy

HEADERS = {"anthropic-version": "2023-06-01"}


def _key() -> str:
    return f"sk-test-{uuid.uuid4().hex}"


async def _calls(db: Path) -> dict[str, list[Exchange]]:
    async with SQLiteStore(db) as store:
        return {x.id: await store.proxy_calls(x.id) for x in await store.proxy_lineages()}


def _claude(client: httpx.Client, history: list[dict[str, Any]], text: str) -> dict[str, Any]:
    history.append({"role": "user", "content": text})
    body = {"model": "claude-sonnet-4-6", "max_tokens": 64, "system": SYSTEM, "tools": TOOLS}
    answer: dict[str, Any] = (
        client.post("/v1/messages", json={**body, "messages": history}).raise_for_status().json()
    )
    history.append({"role": "assistant", "content": answer["content"]})
    return answer


def test_an_openai_call_that_read_everything_is_a_hit_whatever_the_shadow_thinks(
    tmp_path: Path,
) -> None:
    """20 calls in a minute on one route: the shadow accountant models OpenAI's overflow
    past 15 a minute; this upstream did not overflow and reported every read in full (to
    the last 128-token boundary). Nothing was missed, so nothing is reported missed."""
    clock = FrozenClock()
    quiet = SimEngine(openai=OpenAIAccountant(OpenAISettings(overflow_per_minute=None)))
    with (
        serve_in_background(create_app(quiet, clock=clock)) as upstream,
        serve_in_background(
            create_proxy(
                ProxyConfig(upstream=upstream.url),
                sink=SQLiteStore(tmp_path / "proxy.db"),
                clock=clock,
            )
        ) as proxied,
    ):
        proxy = proxied.app.state.proxy
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        headers = {"authorization": f"Bearer {_key()}"}
        reads = []
        with httpx.Client(base_url=proxied.url + "/v1", headers=headers) as client:
            for n in range(20):
                messages.append({"role": "user", "content": f"Question {n}: is this safe?"})
                body = {"model": "gpt-4.1", "messages": messages}
                answer = client.post("/chat/completions", json=body).raise_for_status().json()
                reads.append(answer["usage"]["prompt_tokens_details"]["cached_tokens"])
                messages.append(answer["choices"][0]["message"])
                clock.advance(2)
        assert proxy.wait_recorded()
        proxy.close_from_thread()
        (calls,) = asyncio.run(_calls(tmp_path / "proxy.db")).values()
        report = asyncio.run(_report(tmp_path / "proxy.db"))
    assert all(r > 0 for r in reads[1:])  # the upstream read every time
    verdicts = [c.record.explanation.verdict for c in calls if c.record]
    assert "overflow" not in verdicts
    assert set(verdicts[1:]) == {"hit"}
    assert [m.verdict for lineage in report.lineages for m in lineage.misses] == []


async def _report(db: Path) -> Any:
    async with SQLiteStore(db) as store:
        return await proxy_report(store)


def test_a_chat_call_never_joins_an_anthropic_lineage(tmp_path: Path) -> None:
    """The same words sent to Claude and then to gpt-4.1 from one key: two conversations,
    neither a fork of the other, and no 'model changed' miss nothing could fix."""
    key = _key()
    with behind_proxy(tmp_path) as behind:
        with httpx.Client(base_url=behind.url, headers={**HEADERS, "x-api-key": key}) as c:
            history: list[dict[str, Any]] = []
            _claude(c, history, "Review this diff, please")
        chat = [{"role": "system", "content": SYSTEM}]
        chat += [{"role": "user", "content": "Review this diff, please"}]
        with httpx.Client(
            base_url=behind.openai_url, headers={"authorization": f"Bearer {key}"}
        ) as c:
            answer = c.post("/chat/completions", json={"model": "gpt-4.1", "messages": chat})
            chat.append(answer.raise_for_status().json()["choices"][0]["message"])
            chat.append({"role": "user", "content": "And the tests?"})
            c.post("/chat/completions", json={"model": "gpt-4.1", "messages": chat})
        behind.recorded()
        lineages = asyncio.run(_calls(behind.db))

    async def summaries() -> list[Any]:
        async with SQLiteStore(behind.db) as store:
            return await store.proxy_lineages()

    found = sorted((x.dialect, x.parent_id, x.calls) for x in asyncio.run(summaries()))
    assert found == [("anthropic", None, 1), ("openai_chat", None, 2)]
    for calls in lineages.values():
        for call in calls:
            assert call.record is not None
            assert "model" not in (call.record.explanation.slot or "")


def test_a_request_with_no_breakpoint_says_so_and_the_report_names_the_fix(
    tmp_path: Path,
) -> None:
    """Audit mode, a framework with caching off: the verdict says no breakpoint, and the
    report reads like `stoker report`: dollar totals, and each miss with the fix and what
    it would save."""
    with behind_proxy(tmp_path) as behind:
        with httpx.Client(base_url=behind.url, headers={**HEADERS, "x-api-key": _key()}) as c:
            history: list[dict[str, Any]] = []
            for text in ("Review this diff", "And the tests?", "Thanks, anything else?"):
                _claude(c, history, text)
        behind.recorded()
        (calls,) = asyncio.run(_calls(behind.db)).values()
        out = CliRunner().invoke(app, ["report-proxy", "--db", str(behind.db), "--json"])
        table = CliRunner().invoke(
            app, ["report-proxy", "--db", str(behind.db)], env={"COLUMNS": "200"}
        )
    assert [c.record.explanation.verdict for c in calls if c.record] == ["no_breakpoint"] * 3
    assert "no cache breakpoint" in calls[1].record.explanation.detail  # type: ignore[union-attr]
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["cost"]["usd"] > 0
    assert report["savings_usd"] == 0  # nothing was cached: no saving, and no loss
    (lineage,) = report["lineages"]
    misses = lineage["misses"]
    assert [m["call"] for m in misses] == [2, 3]
    assert all("--optimize" in m["fix"] and "cache_control" in m["fix"] for m in misses)
    assert all(m["saving_usd"] > 0 for m in misses)
    (what_if,) = report["what_if"]
    assert what_if["name"] == "http_client(optimize=True) or stoker proxy --optimize"
    assert what_if["saving_usd"] > 0
    assert table.exit_code == 0, table.output
    assert "cost $" in table.output
    assert "saved $" in table.output
    assert "--optimize would have saved $" in table.output


def test_optimize_mode_reports_its_breakpoints_in_a_few_lines(tmp_path: Path) -> None:
    """Twelve calls, two breakpoints each: the report says where they went, once."""
    with behind_proxy(tmp_path, optimize=True) as behind:
        with httpx.Client(base_url=behind.url, headers={**HEADERS, "x-api-key": _key()}) as c:
            history: list[dict[str, Any]] = []
            for n in range(12):
                _claude(c, history, f"Question {n}: anything to fix?")
        behind.recorded()
        table = CliRunner().invoke(
            app, ["report-proxy", "--db", str(behind.db)], env={"COLUMNS": "200"}
        )
    assert table.exit_code == 0, table.output
    lines = [line for line in table.output.splitlines() if "breakpoint" in line]
    assert 1 <= len(lines) <= 2, lines
    assert "12 calls" in lines[0]


def test_optimize_mode_seals_a_settled_lineage_when_sealing_is_cheaper(tmp_path: Path) -> None:
    """Across a 40-minute gap Stoker's own sessions seal (one 1-hour write over the
    settled prefix, the answer included) instead of pinging eight times: so does the
    proxy, and the turn after the gap reads all of it."""
    key = _key()
    with behind_proxy(tmp_path, optimize=True) as behind:
        proxy = behind.proxy
        assert proxy.keep_warm is not None
        with httpx.Client(base_url=behind.url, headers={**HEADERS, "x-api-key": key}) as c:
            history: list[dict[str, Any]] = []
            _claude(c, history, "Review this diff")
            behind.recorded()
            proxy.run_on_loop(proxy.keep_warm.idle(40 * 60))
            answer = _claude(c, history, "Back again: and the tests?")
        behind.recorded()
        (calls,) = asyncio.run(_calls(behind.db)).values()
    assert [c.purpose for c in calls] == ["turn", "seal", "turn"]
    seal = calls[1].record
    assert seal is not None
    assert seal.usage.written_1h > 0
    assert seal.breakpoints[-1].ttl == "1h"
    usage = answer["usage"]
    assert usage["cache_read_input_tokens"] > 0
    # Only the new user message was written: the answer before it was sealed.
    assert usage["cache_creation_input_tokens"] < 40
