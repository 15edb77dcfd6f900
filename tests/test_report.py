"""`stoker report`: the demo's session charted to HTML (checked in headless Chromium) and
PNG, a deliberate tools[] change costed by the exact accountant, and calls nobody prices
counted apart from the known totals until prices.toml names their model."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import struct
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.agent.agent import Agent
from stoker.agent.keepwarm import KeepWarm
from stoker.bench.cache import SYSTEM, TOOLS
from stoker.cache.models import model_info
from stoker.cache.planner import CachePolicy
from stoker.cache.prices import PriceBook
from stoker.cache.pricing import sum_costs, uncached_cost_usd
from stoker.cli.app import app
from stoker.clock import FrozenClock
from stoker.errors import StokerError
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.report import build_report
from stoker.report.png import HEIGHT, WIDTH
from stoker.store.sqlite import SQLiteStore
from stoker.tools import tool
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage
from tests.test_delegate import DelegatingModel
from tests.test_delegate import _agent as delegating_agent
from tests.test_gateway_browser import WebDriver, browser

__all__ = ["browser"]  # the fixture, shared with the dashboard's browser test

runner = CliRunner()


def _cli(*args: str, home: Path) -> str:
    result = runner.invoke(app, list(args), env={"STOKER_HOME": str(home), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


async def _records(db: Path) -> list[CacheRecord]:
    """Every record in the database, read straight from the events (not by the report)."""
    records = []
    async with SQLiteStore(db) as store:
        for summary in await store.list_sessions(limit=1000):
            for _, type_, _, body in await store.events(summary.id):
                if type_ == "cache_recorded":
                    records.append(CacheRecord.from_dict(json.loads(body)))
    return records


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture
def demo_report(tmp_path: Path) -> tuple[Path, Path, Path]:
    """`stoker demo --save`, then `stoker report ID --html --png` on its session."""
    db = tmp_path / "demo.db"
    out = _cli("demo", "--save", "--db", str(db), home=tmp_path)
    session_id = out.split("stored as session ", 1)[1].split(";", 1)[0]
    html, png = tmp_path / "out" / "report.html", tmp_path / "out" / "report.png"
    out = _cli(
        "report", session_id, "--html", str(html), "--png", str(png), "--db", str(db),
        home=tmp_path,
    )  # fmt: skip
    assert f"wrote {html}" in out
    assert f"wrote {png}" in out
    return db, html, png


async def test_the_demo_png_is_a_whole_chart(demo_report: tuple[Path, Path, Path]) -> None:
    _, _, png = demo_report
    data = png.read_bytes()
    assert _png_size(data) == (WIDTH, HEIGHT)
    assert len(data) > 20_000  # bars, lines and labels, not a blank canvas


async def test_the_demo_html_chart_and_savings_equal_the_records(
    demo_report: tuple[Path, Path, Path], browser: WebDriver
) -> None:
    db, html, _ = demo_report
    records = await _records(db)
    assert len({r.session_id for r in records}) == 4  # the main session and three reviews
    page = html.read_text(encoding="utf-8")
    assert "<script src=" not in page  # everything inline: nothing to fetch at view time
    browser.go(html.as_uri())
    assert browser.run("return typeof Plotly") == "object"
    traces = browser.run(
        "return document.getElementById('chart-0').data.map("
        "t => [t.meta, Array.from(t.y).reduce((a, b) => a + b, 0), Array.from(t.y)])"
    )
    drawn = {meta: (total, ys) for meta, total, ys in traces}
    for bucket in ("read", "written_5m", "written_1h", "uncached"):
        assert drawn[bucket][0] == sum(getattr(r.usage, bucket) for r in records), bucket
    cost = sum(r.cost_usd for r in records if r.cost_usd is not None)
    no_cache = sum(uncached_cost_usd(r.usage, model_info(r.model)) or 0.0 for r in records)
    assert drawn["cost"][1][-1] == pytest.approx(cost)
    assert drawn["no_cache"][1][-1] == pytest.approx(no_cache)
    assert drawn["miss"][1] == []  # the demo reads every prefix it could
    savings = browser.run("return document.getElementById('savings').dataset.usd")
    assert float(savings) == pytest.approx(no_cache - cost)
    shown = browser.run("return document.getElementById('savings').textContent")
    assert shown == f"${no_cache - cost:,.5f}"
    assert browser.run("return document.querySelector('.js-plotly-plot .bars') !== null")
    rows = browser.run(
        "return Array.from(document.querySelectorAll('table.sessions tr[data-session]'))"
        ".map(r => r.dataset.session)"
    )
    assert sorted(rows) == sorted({r.session_id for r in records})


async def test_the_demo_json_splits_the_tree_by_session(
    demo_report: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    db, _, _ = demo_report
    records = await _records(db)
    session_id = next(r.session_id for r in records if r.role == "main")
    data = await asyncio.to_thread(
        _cli, "report", session_id, "--db", str(db), "--json", home=tmp_path
    )
    (lineage,) = json.loads(data)["lineages"]
    by_role = sorted((s["role"], s["usage"]["read"]) for s in lineage["sessions"])
    expected = sorted(
        (role, sum(r.usage.read for r in records if r.session_id == sid))
        for sid, role in {(r.session_id, r.role) for r in records}
    )
    assert by_role == expected
    assert [c["number"] for c in lineage["calls"]] == list(range(1, len(records) + 1))


@tool
def changelog(path: str) -> str:
    """Show the changelog of a path.

    Args:
        path: The file or folder.
    """
    return f"changes of {path}"


PROMPTS = ("Work on it: run 2 steps", "Work on it: run 3 steps", "Work on it: run 1 steps")


def _agent(clock: FrozenClock, policy: CachePolicy | None = None) -> Agent:
    """A fresh simulator each time: the same calls get the same ids and usage."""
    return Agent(
        "claude-sonnet-4-6",
        provider=SimProvider(engine=SimEngine(), clock=clock),
        tools=TOOLS,
        system=SYSTEM,
        clock=clock,
        cache_policy=policy or CachePolicy(),
    )


async def _run(db: Path, *, change_tools: bool) -> list[CacheRecord]:
    """Three turns a minute apart; with `change_tools`, a tool is added before the second."""
    clock = FrozenClock()
    agent = _agent(clock)
    async with SQLiteStore(db) as store:
        session = await agent.open(store, "s")
        records: list[CacheRecord] = []
        for n, prompt in enumerate(PROMPTS):
            if n == 1 and change_tools:
                await session.rebase(reason="a new tool", tools=[*TOOLS, changelog])
            records += (await session.send(prompt)).records
            clock.advance(60)
    return records


@pytest.mark.breaks_cache(reason="the deliberate tools[] change under test")
async def test_a_tools_change_costs_what_the_accountant_gives_without_it(tmp_path: Path) -> None:
    changed = await _run(tmp_path / "changed.db", change_tools=True)
    unchanged = await _run(tmp_path / "unchanged.db", change_tools=False)
    assert [r.fingerprints.history for r in changed] == [r.fingerprints.history for r in unchanged]
    async with SQLiteStore(tmp_path / "changed.db") as store:
        report = await build_report(store, "s", prices=PriceBook())
    (lineage,) = report.lineages
    assert lineage.replay_checked
    (miss,) = lineage.misses
    k = next(i for i, r in enumerate(changed) if r.explanation.verdict == "declared")
    assert miss.call == k + 1
    assert miss.replayed
    assert "tools" in miss.explanation
    info = model_info("claude-sonnet-4-6")
    paid = [r.cost_usd or 0.0 for r in changed]
    without = [r.cost_usd or 0.0 for r in unchanged]
    assert miss.cost_usd == pytest.approx(paid[k] - without[k])
    assert miss.saving_usd == pytest.approx(sum(paid) - sum(without))
    assert miss.read_with_fix == unchanged[k].usage.read
    assert miss.cost_usd > 0
    assert miss.saving_usd >= miss.cost_usd  # the later calls wrote the new tools again too
    assert info.price is not None


async def _gap(db: Path, policy: CachePolicy | None = None) -> list[CacheRecord]:
    """Two turns ten minutes apart: the 5-minute entries expire in between."""
    clock = FrozenClock()
    async with SQLiteStore(db) as store:
        session = await _agent(clock, policy).open(store, "g")
        records = list((await session.send(PROMPTS[0])).records)
        clock.advance(minutes=10)
        records += (await session.send(PROMPTS[1])).records
    return records


async def test_an_expiry_costs_what_the_accountant_gives_with_1h_entries(tmp_path: Path) -> None:
    expired = await _gap(tmp_path / "5m.db")
    kept = await _gap(tmp_path / "1h.db", CachePolicy(system_ttl="1h", message_ttl="1h"))
    k = next(i for i, r in enumerate(expired) if r.explanation.verdict == "expired")
    assert [r.breakpoints[-1].ttl for r in kept] == ["1h"] * len(kept)
    assert kept[k].usage.read > expired[k].usage.read
    async with SQLiteStore(tmp_path / "5m.db") as store:
        report = await build_report(store, "g", prices=PriceBook())
    (lineage,) = report.lineages
    (miss,) = lineage.misses
    assert (miss.call, miss.verdict, miss.replayed) == (k + 1, "expired", True)
    paid = [r.cost_usd or 0.0 for r in expired]
    fixed = [r.cost_usd or 0.0 for r in kept]
    assert miss.cost_usd == pytest.approx(paid[k] - fixed[k])
    assert miss.saving_usd == pytest.approx(sum(paid) - sum(fixed))
    assert miss.read_with_fix == kept[k].usage.read
    assert "1-hour TTL" in miss.fix


async def _mixed(db: Path) -> list[CacheRecord]:
    """Two turns on a priced model, then two on one the catalogue does not price."""
    clock = FrozenClock()
    agent = _agent(clock)
    async with SQLiteStore(db) as store:
        session = await agent.open(store, "m")
        records = list((await session.send(PROMPTS[0])).records)
        await session.rebase(reason="/model claude-mythos-5-1", model="claude-mythos-5-1")
        records += (await session.send(PROMPTS[1])).records
    return records


@pytest.mark.breaks_cache(reason="a model switch to one nobody prices")
def test_unpriced_calls_never_hide_the_known_totals(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    records = asyncio.run(_mixed(db))
    priced = [r for r in records if r.cost_usd is not None]
    unpriced = [r for r in records if r.cost_usd is None]
    assert priced
    assert unpriced
    out = _cli("report", "m", "--db", str(db), "--json", home=tmp_path)
    data = json.loads(out)
    assert data["cost"] == {
        "usd": pytest.approx(sum(r.cost_usd for r in priced)),  # type: ignore[misc]
        "priced_calls": len(priced),
        "unpriced_calls": len(unpriced),
    }
    (message,) = data["unpriced"]
    assert "claude-mythos-5-1" in message
    assert str(tmp_path / "prices.toml") in message  # where to add the price
    table = _cli("report", "m", "--db", str(db), home=tmp_path)
    known = sum_costs(r.cost_usd for r in records)
    assert f"cost {known}" in table.replace("\n", " ")
    assert "with no price" in str(known)
    assert str(tmp_path / "prices.toml") in table.replace("\n", "")


@pytest.mark.breaks_cache(reason="a model switch to one nobody prices")
def test_prices_toml_prices_the_calls_the_catalogue_does_not(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    records = asyncio.run(_mixed(db))
    (tmp_path / "prices.toml").write_text(
        '[models."claude-mythos-5-1"]\ninput = 10.0\noutput = 50.0\n'
        "cache_read = 0.25\ncache_write = 12.5\ncache_write_1h = 20.0\n",
        encoding="utf-8",
    )
    data = json.loads(_cli("report", "--all", "--db", str(db), "--json", home=tmp_path))
    assert data["unpriced"] == []
    book = PriceBook.load(tmp_path / "prices.toml")
    expected = sum(
        r.cost_usd if r.cost_usd is not None else book.require(r.model, "anthropic").cost(r.usage)
        for r in records
    )
    assert data["cost"]["usd"] == pytest.approx(expected)
    assert data["cost"]["unpriced_calls"] == 0


def test_report_needs_a_session_or_all(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report"], env={"STOKER_HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "name one SESSION, or --all" in result.output
    home = {"STOKER_HOME": str(tmp_path), "STOKER_DB": "", "STOKER_DATABASE_URL": ""}
    result = runner.invoke(app, ["report", "nope"], env=home)  # the default database
    assert result.exit_code == 1
    assert "no session 'nope'" in result.output


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def stored_gap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-call session, closed (so the file holds everything), to copy and damage."""
    db = tmp_path_factory.mktemp("gap") / "g.db"
    asyncio.run(_gap(db))
    return db


@pytest.mark.slow  # a thousand damaged copies reported
@settings(max_examples=1000, deadline=None)
@given(
    key=st.sampled_from(
        ["usage", "fingerprints", "breakpoints", "explanation", "started_at", "seq"]
    ),
    value=JSON,
)
def test_a_damaged_record_is_a_clear_error_or_still_reports(
    stored_gap: Path, key: str, value: object
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _report_damaged(Path(tmp) / "damaged.db", stored_gap, key, value)


def _report_damaged(db: Path, stored: Path, key: str, value: object) -> None:
    db.write_bytes(stored.read_bytes())
    with sqlite3.connect(db) as conn:
        (rowid, body), *_ = conn.execute(
            "SELECT rowid, body FROM events WHERE type = 'cache_recorded' ORDER BY seq DESC"
        ).fetchall()
        data = json.loads(body)
        data[key] = value
        conn.execute("UPDATE events SET body = ? WHERE rowid = ?", (json.dumps(data), rowid))

    async def run() -> None:
        async with SQLiteStore(db) as store:
            await build_report(store, "g", prices=PriceBook())

    try:
        asyncio.run(run())
        error = ""
    except StokerError as exc:
        error = str(exc)
    assert not error or "session 'g'" in error


def test_an_unwritable_output_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    for flag, what in (("--html", "HTML report"), ("--png", "PNG chart")):
        result = runner.invoke(
            app,
            ["report", "--all", flag, str(blocker / "out")],
            env={
                "STOKER_HOME": str(tmp_path),
                "STOKER_DB": "",
                "STOKER_DATABASE_URL": "",
                "COLUMNS": "300",
            },
        )
        assert result.exit_code == 1, result.output
        assert f"cannot write the {what} to {blocker / 'out'}" in result.output


async def test_keep_warm_requests_are_replayed_with_their_placeholder(tmp_path: Path) -> None:
    clock = FrozenClock()
    async with SQLiteStore(tmp_path / "k.db") as store:
        session = await _agent(clock).open(store, "k")
        scheduler = KeepWarm(clock)
        scheduler.watch(session)
        await session.send(PROMPTS[0])
        fired = await scheduler.idle(4 * 60)
        fired += await scheduler.idle(8 * 60)  # a long gap: sealed under a 1-hour entry
        await session.send(PROMPTS[1])
        report = await build_report(store, "k", prices=PriceBook())
    assert [r.purpose for r in fired] == ["seal"]
    (lineage,) = report.lineages
    assert [c.record.purpose for c in lineage.calls] == ["turn", "seal", "turn"]
    assert lineage.replay_checked  # the seal's placeholder tokens included, as billed
    assert lineage.misses == ()
    assert lineage.cost.usd == pytest.approx(sum(c.record.cost_usd or 0 for c in lineage.calls))


async def test_a_tree_with_parallel_sub_agents_is_one_report(tmp_path: Path) -> None:
    agent, _ = delegating_agent(DelegatingModel(fan=3), max_depth=1)
    async with SQLiteStore(tmp_path / "d.db") as store:
        session = await agent.open(store, "d")
        await session.send("warm up")
        await session.send("delegate three ways")
        # Any session of the tree names the whole tree.
        child = (await store.children("d"))[0]
        report = await build_report(store, child, prices=PriceBook())
    records = await _records(tmp_path / "d.db")
    (lineage,) = report.lineages
    assert lineage.root_id == "d"
    assert sorted(s.role for s in lineage.sessions) == ["main", "subagent", "subagent", "subagent"]
    assert lineage.replay_checked
    assert len(lineage.calls) == len(records) == 9
    for part in lineage.by_session():
        own = [r for r in records if r.session_id == part.session.id]
        assert part.usage == Usage.total(r.usage for r in own)
