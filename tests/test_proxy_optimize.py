"""`stoker proxy --optimize`: a framework's traffic with caching off, replayed through it.

A conversation is first recorded in audit mode as a framework with caching off sends it
(no `cache_control` anywhere); its recorded bodies are then replayed through an
optimizing proxy to a fresh simulator, which must report cache reads on every call
after the first, while the report lists the breakpoints the proxy added.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from stoker.cli import app
from stoker.proxy import proxy_report
from stoker.proxy.replay import full_bodies
from stoker.store.sqlite import SQLiteStore
from stoker.wire.exchange import Exchange
from tests.proxy_helpers import RECORDING, SYSTEM, TOOLS, behind_proxy

HEADERS = {"anthropic-version": "2023-06-01"}


def _conversation(client: httpx.Client, turns: int) -> None:
    """A tool loop as a caching-off framework runs it: every call resends everything."""
    history: list[dict[str, Any]] = []
    for n in range(turns):
        history.append({"role": "user", "content": f"Step {n}: read the file 'part{n}.py'"})
        while True:
            body = {"model": "claude-sonnet-4-6", "max_tokens": 512, "system": SYSTEM}
            body |= {"tools": TOOLS, "messages": history}
            answer = client.post("/v1/messages", json=body).raise_for_status().json()
            history = [*history, {"role": "assistant", "content": answer["content"]}]
            calls = [b for b in answer["content"] if b["type"] == "tool_use"]
            if not calls:
                break
            results = [
                {"type": "tool_result", "tool_use_id": c["id"], "content": "x = 1\n" * 40}
                for c in calls
            ]
            history.append({"role": "user", "content": results})


async def _calls(db: Path) -> list[list[Exchange]]:
    async with SQLiteStore(db) as store:
        return [await store.proxy_calls(x.id) for x in await store.proxy_lineages()]


@pytest.mark.parametrize("recording", RECORDING)
def test_a_caching_off_sequence_replayed_through_optimize_reads_after_the_first_call(
    tmp_path: Path, recording: str
) -> None:
    key = f"sk-test-{uuid.uuid4().hex}"
    headers = {**HEADERS, "x-api-key": key}
    with behind_proxy(tmp_path / "audit", recording=recording) as audit:
        with httpx.Client(base_url=audit.url, headers=headers) as client:
            _conversation(client, turns=4)
        audit.recorded()
        (recorded,) = asyncio.run(_calls(audit.db))
    bodies = full_bodies(recorded)
    assert len(bodies) == 8
    assert all("cache_control" not in str(b) for b in bodies)
    assert [r.record.usage.read for r in recorded if r.record] == [0] * 8

    with behind_proxy(tmp_path / "optimize", optimize=True, recording=recording) as optimize:
        with httpx.Client(base_url=optimize.url, headers=headers) as client:
            usages = [
                client.post("/v1/messages", json=b).raise_for_status().json()["usage"]
                for b in bodies
            ]
        optimize.recorded()
        (replayed,) = asyncio.run(_calls(optimize.db))
        report = asyncio.run(_report(optimize.db))
        sent = optimize.sim.sent_by(key)
    assert usages[0]["cache_read_input_tokens"] == 0
    assert all(u["cache_read_input_tokens"] > 0 for u in usages[1:])
    # The model saw what the client sent: only cache markers were added.
    assert [_unmarked(s) for s in sent] == [_unmarked(b) for b in bodies]
    assert [r.record.usage.read for r in replayed if r.record] == [
        u["cache_read_input_tokens"] for u in usages
    ]
    assert [n for r in replayed for n in r.rewrites if "breakpoint" in n][:2] == [
        "added breakpoint tools+system (5m)",
        "added breakpoint messages[0].content[0] (5m)",
    ]
    assert all(str(s).count("cache_control") <= 4 for s in sent)
    (tree,) = report.lineages
    assert tree.notes[1] == (
        "--optimize placed breakpoints in 8 calls: tools+system (5m) ×8, a message block (5m) ×8"
    )
    (figures,) = tree.extra["lineages"]
    assert figures["read_share"] > 0.8
    assert figures["writes_vs_ideal"] == 1.0
    assert report.cost.usd < 0.3 * report.no_cache_cost.usd
    assert tree.misses == ()


async def _report(db: Path) -> Any:
    async with SQLiteStore(db) as store:
        return await proxy_report(store)


def _unmarked(value: Any) -> Any:
    """`value` without its cache markers, and a one-text-block list as the string it
    stands for (the proxy turns a string into a block to hang a marker on)."""
    if isinstance(value, dict):
        out = {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
        for key in ("system", "content"):
            v = out.get(key)
            if isinstance(v, list) and len(v) == 1 and v[0].keys() == {"type", "text"}:
                out[key] = v[0]["text"]
        return out
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


@pytest.mark.parametrize("recording", RECORDING)
def test_report_command_lists_added_breakpoints_and_a_timestamp_it_cannot_fix(
    tmp_path: Path, recording: str
) -> None:
    """A system prompt carrying the time moves on every call: optimize mode cannot fix it
    without changing what the model reads, so it names the slot and the cost."""
    headers = {**HEADERS, "x-api-key": f"sk-test-{uuid.uuid4().hex}"}
    with behind_proxy(tmp_path, optimize=True, recording=recording) as optimize:
        with httpx.Client(base_url=optimize.url, headers=headers) as client:
            history: list[dict[str, Any]] = []
            for minute in (10, 11):
                history.append({"role": "user", "content": f"Question {minute}"})
                body = {
                    "model": "claude-sonnet-4-6",
                    "max_tokens": 64,
                    "system": f"Now: 2026-09-21 12:{minute}. {SYSTEM}",
                    "messages": history,
                }
                answer = client.post("/v1/messages", json=body).raise_for_status().json()
                history.append({"role": "assistant", "content": answer["content"]})
        optimize.recorded()
        result = CliRunner().invoke(app, ["report-proxy", "--db", str(optimize.db), "--json"])
    assert result.exit_code == 0, result.output
    (lineage,) = json.loads(result.output)["lineages"]
    assert len(lineage["calls"]) == 2
    assert "placed breakpoints in 2 calls: tools+system (5m) ×2" in lineage["notes"][1]
    (cannot,) = [n for n in lineage["notes"] if n.startswith("cannot fix")]
    assert cannot.startswith("cannot fix #1 system[0] at byte 20 [timestamp-like]")
    (miss,) = lineage["misses"]
    assert (miss["call"], miss["verdict"]) == (2, "diverged")
    assert miss["lost_tokens"] > 1024
    assert miss["cost_usd"] > 0
    assert miss["fix"] == "send the previous bytes unchanged"
    table = CliRunner().invoke(
        app, ["report-proxy", "--db", str(optimize.db)], env={"COLUMNS": "200"}
    )
    assert "cannot fix #1 system[0] at byte 20 [timestamp-like]" in table.output


def test_proxy_command_refuses_a_bad_upstream_or_listen_address() -> None:
    for args in (["--upstream", "ftp://x"], ["--listen", "nowhere"]):
        result = CliRunner().invoke(app, ["proxy", *args])
        assert result.exit_code == 2
        assert "error:" in result.output


NOTE_SCHEMA = {  # a framework's own key order: not canonical
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "description": "What to note."}},
}


@pytest.mark.parametrize("recording", RECORDING)
def test_a_client_that_flaps_its_tool_order_sends_the_lineages_first_order(
    tmp_path: Path, recording: str
) -> None:
    """Calls 2 and 3 send the tools in another order (the same list twice: the second
    time the rewrite is the one the lineage remembers); the upstream always gets the
    first order with canonical schemas, and each call reads what the last one wrote."""
    key = f"sk-test-{uuid.uuid4().hex}"
    note = {"name": "add_note", "description": "Note a fact.", "input_schema": NOTE_SCHEMA}
    orders = [[*TOOLS, note], [note, *TOOLS], [note, *TOOLS]]
    with behind_proxy(tmp_path, optimize=True, recording=recording) as optimize:
        history: list[dict[str, Any]] = []
        reads = []
        with httpx.Client(base_url=optimize.url, headers={**HEADERS, "x-api-key": key}) as c:
            for n, tools in enumerate(orders):
                history.append({"role": "user", "content": f"Question {n}?"})
                body = {"model": "claude-sonnet-4-6", "max_tokens": 64, "system": SYSTEM}
                answer = c.post("/v1/messages", json={**body, "tools": tools, "messages": history})
                reads.append(answer.raise_for_status().json()["usage"]["cache_read_input_tokens"])
                history.append({"role": "assistant", "content": answer.json()["content"]})
        optimize.recorded()
        sent = optimize.sim.sent_by(key)
        (calls,) = asyncio.run(_calls(optimize.db))
    first = [json.loads(json.dumps(t, sort_keys=True)) for t in orders[0]]
    for payload in sent:
        tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in payload["tools"]]
        assert tools == first
        assert [list(t["input_schema"]) for t in tools] == [
            sorted(t["input_schema"]) for t in tools
        ]
    kept = (
        "tools: kept the lineage's order ['read_file', 'add_note'] "
        "(client sent ['add_note', 'read_file'])"
    )
    assert [kept in c.rewrites for c in calls] == [False, True, True]
    canonical = [
        "tools: canonical JSON key order in read_file, add_note",
        "tools: canonical JSON key order in add_note, read_file",
        "tools: canonical JSON key order in add_note, read_file",
    ]
    assert [c.rewrites[0] for c in calls] == canonical
    assert reads[0] == 0
    assert all(r > 0 for r in reads[1:])
