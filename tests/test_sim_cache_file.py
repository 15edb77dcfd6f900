"""The embedded simulator keeps its cache in the Stoker home between processes, as a real
provider keeps its own (`stoker.providers.sim.cache_file`): a second `stoker run` within
the TTL reads what the first wrote; after the TTL the miss is an expiry, not a cold start;
a file it cannot use costs one warning, never a call; and keeping the entries in the file
changes no outcome of the accounting."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.agent.agent import Agent
from stoker.cache.accounting import CacheEntry, CacheOutcome, EntryStore
from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.config import Config
from stoker.errors import InvalidRequest
from stoker.providers.select import select_provider
from stoker.providers.sim.cache_file import SimCacheFile
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.session_views import show_session
from stoker.store.sqlite import SQLiteStore
from stoker.wire.record import CacheRecord

runner = CliRunner()
NOW = 1_790_000_000.0
SYSTEM = "You review pull requests for a Python team and keep every answer short. " * 120


def _records(home: Path, session: str) -> list[list[CacheRecord]]:
    """The calls of each turn of `session` in the home's database."""

    async def read() -> list[list[CacheRecord]]:
        async with SQLiteStore(home / "stoker.db") as store:
            view = await show_session(store, session)
        return [list(t.records) for t in view.turns]

    return asyncio.run(read())


def _stoker_run(home: Path, workdir: Path, prompt: str) -> None:
    """`stoker run --session S PROMPT` in a process of its own."""
    env = {**os.environ, "STOKER_HOME": str(home), "COLUMNS": "200"}
    command = ["run", "--workdir", str(workdir), "--session", "S", prompt]
    done = subprocess.run(
        [sys.executable, "-m", "stoker", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cannot keep its cache" not in done.stderr


def _age(file: Path, seconds: float) -> None:
    """Every kept entry as if written `seconds` earlier: the wall clock jumps ahead."""
    with sqlite3.connect(file) as db:
        db.execute(
            "UPDATE entries SET created_at = created_at - ?, available_at = available_at - ?, "
            "last_used = last_used - ?, expires_at = expires_at - ?",
            (seconds,) * 4,
        )


def test_a_second_stoker_run_reads_what_the_first_process_wrote(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _stoker_run(home, work, "hello there")
    _stoker_run(home, work, "hello again")
    first, second = _records(home, "S")
    assert (home / "sim-cache.db").is_file()
    assert first[0].usage.read == 0
    assert first[0].usage.written > 1000
    # the new process's first call reads the prefix the other process wrote
    assert second[0].usage.read >= first[0].usage.written
    assert second[0].explanation.verdict == "hit"


def test_a_run_after_the_ttl_misses_as_an_expiry_not_a_cold_cache(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    args = ["run", "--workdir", str(work), "--session", "S"]
    env = {"STOKER_HOME": str(home)}
    assert runner.invoke(app, [*args, "hello there"], env=env).exit_code == 0
    _age(home / "sim-cache.db", 2 * 3600)  # two hours later: past the 5-minute TTL
    ran = runner.invoke(app, [*args, "hello again"], env=env)
    assert ran.exit_code == 0, ran.output
    (first,), (second,) = _records(home, "S")
    assert second.usage.read == 0
    assert second.explanation.verdict == "expired"
    expired = re.search(r"prefix expired (\d+) s ago \(TTL 5m\)", second.explanation.detail)
    assert expired, second.explanation.detail
    assert int(expired[1]) >= 2 * 3600 - 300
    assert first.usage.written <= second.usage.written


def test_rows_expired_over_a_day_ago_are_pruned_by_the_next_call(tmp_path: Path) -> None:
    config = Config.from_env({}, home=tmp_path)
    file = config.sim_cache_file

    def keys() -> set[str]:
        with sqlite3.connect(file) as db:
            return {k for (k,) in db.execute("SELECT key FROM entries")}

    async def call(system: str) -> None:
        async with Agent("sim:claude-sonnet-4-6", system=system, config=config) as agent:
            await agent.session().send("hello")

    asyncio.run(call(SYSTEM))
    old = keys()
    _age(file, 3600)  # expired an hour ago: kept, to explain the next miss
    asyncio.run(call("Another prompt. " + SYSTEM))
    new = keys() - old
    assert old
    assert new
    assert old <= keys()
    _age(file, 2 * 86400)  # all of them expired two days ago: the next call prunes them
    asyncio.run(call("A third prompt. " + SYSTEM))
    assert keys().isdisjoint(old | new)


@pytest.mark.parametrize("damage", ["garbage", "directory", "future schema"])
def test_a_file_it_cannot_use_costs_one_warning_and_no_call(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config.from_env({}, home=tmp_path)
    file = config.sim_cache_file
    if damage == "garbage":
        file.write_bytes(b"not a database at all\x00" * 100)
    elif damage == "directory":
        file.mkdir()
    else:
        with sqlite3.connect(file) as db:
            db.execute("PRAGMA user_version = 99")

    async def two_turns(provider: Any) -> list[CacheRecord]:
        async with Agent(provider=provider, model="claude-sonnet-4-6", system=SYSTEM) as agent:
            session = agent.session()
            await session.send("hello")
            await session.send("and again")
            return list(session.records)

    with caplog.at_level(logging.WARNING, logger="stoker"):
        kept = asyncio.run(two_turns(select_provider("sim:", config=config).provider))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert str(file) in warnings[0].getMessage()
    assert "memory" in warnings[0].getMessage()
    # the calls went on in memory, exactly as a simulator without a file
    alone = asyncio.run(two_turns(SimProvider()))
    assert [r.usage for r in kept] == [r.usage for r in alone]
    assert kept[1].usage.read > 0


def test_a_frozen_clock_and_a_missing_config_keep_the_cache_in_memory(tmp_path: Path) -> None:
    config = Config.from_env({}, home=tmp_path)
    frozen = select_provider("sim:", config=config, clock=FrozenClock()).provider
    bare = select_provider("sim:").provider
    wall = select_provider("sim:", config=config).provider
    files = [
        p.cache_file.path if isinstance(p, SimProvider) and p.cache_file else None
        for p in (frozen, bare, wall)
    ]
    assert files == [None, None, tmp_path / "sim-cache.db"]


def test_the_demo_prints_the_same_twice_in_one_home(tmp_path: Path) -> None:
    env = {"STOKER_HOME": str(tmp_path)}
    first = runner.invoke(app, ["demo"], env=env)
    second = runner.invoke(app, ["demo"], env=env)
    assert first.exit_code == second.exit_code == 0
    assert first.output == second.output
    assert not (tmp_path / "sim-cache.db").exists()  # the demo's simulator has its own clock


def test_an_openai_model_on_the_simulator_reads_across_processes_too(tmp_path: Path) -> None:
    config = Config.from_env({}, home=tmp_path)

    async def first_call() -> CacheRecord:
        async with Agent("sim:gpt-5.6", system=SYSTEM, config=config) as agent:
            session = agent.session()
            await session.send("hello")
            return session.records[0]

    one, two = asyncio.run(first_call()), asyncio.run(first_call())
    assert one.usage.read == 0
    assert two.usage.read > 0


def test_a_refused_call_writes_nothing_and_the_file_stays_in_use(tmp_path: Path) -> None:
    engine, kept = SimEngine(), SimCacheFile(tmp_path / "sim-cache.db")
    bad = {**_payload(0, 1, True), "max_tokens": "many"}
    with pytest.raises(InvalidRequest):
        kept.call(
            engine,
            "anthropic",
            "default",
            at=NOW,
            run=lambda: engine.handle("anthropic", bad, at=NOW),
        )
    good = _payload(0, 1, True)
    done = kept.call(
        engine, "anthropic", "default", at=NOW, run=lambda: engine.handle("anthropic", good, at=NOW)
    )
    assert done.outcome.usage.written > 0
    assert kept.in_use


def test_processes_sharing_the_file_at_once_lose_no_write(tmp_path: Path) -> None:
    """Two engines (two processes' worth: each its own connection) call at once; each
    writes its own prefix, and a third, started after, reads both."""
    file = tmp_path / "sim-cache.db"
    failures: list[BaseException] = []

    def calls(system: int) -> None:
        engine, kept = SimEngine(), SimCacheFile(file)
        try:
            for n in range(15):
                payload = _payload(system, n % 4, False)
                at = NOW + n
                kept.call(
                    engine,
                    "anthropic",
                    "default",
                    at=at,
                    run=lambda p=payload, t=at: engine.handle("anthropic", p, at=t),
                )
            assert kept.in_use
        except BaseException as exc:  # reported by the test, not lost in a thread
            failures.append(exc)
        finally:
            kept.close()

    threads = [threading.Thread(target=calls, args=(s,)) for s in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    engine, kept = SimEngine(), SimCacheFile(file)
    for system in (0, 1):
        payload = _payload(system, 0, False)
        got = kept.call(
            engine,
            "anthropic",
            "default",
            at=NOW + 20,
            run=lambda p=payload: engine.handle("anthropic", p, at=NOW + 20),
        )
        assert got.outcome.usage.read > 1000


def _call(kept: SimCacheFile, engine: SimEngine, payload: dict[str, Any], at: float) -> Any:
    return kept.call(
        engine,
        "anthropic",
        "default",
        at=at,
        run=lambda: engine.handle("anthropic", payload, at=at),
    ).outcome


def test_an_open_engine_reads_what_another_process_wrote_since_it_last_looked(
    tmp_path: Path,
) -> None:
    """The engine that loaded the file before reads it again once another connection has
    committed (`PRAGMA data_version`), not only at its first call."""
    file = tmp_path / "sim-cache.db"
    one_engine, one = SimEngine(), SimCacheFile(file)
    two_engine, two = SimEngine(), SimCacheFile(file)
    assert _call(one, one_engine, _payload(0, 0, False), NOW).usage.read == 0
    one.flush()
    assert _call(two, two_engine, _payload(1, 0, False), NOW + 1).usage.read == 0
    two.flush()
    # the prefix the other process wrote after this one last loaded
    assert _call(one, one_engine, _payload(1, 0, False), NOW + 2).usage.read > 1000
    one.close()
    two.close()


def test_what_a_call_changed_is_in_the_file_once_flushed_or_closed(tmp_path: Path) -> None:
    file = tmp_path / "sim-cache.db"
    engine, kept = SimEngine(), SimCacheFile(file)
    _call(kept, engine, _payload(0, 0, False), NOW)
    kept.flush()
    with sqlite3.connect(file) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM entries").fetchone()
    assert count > 0
    _call(kept, engine, _payload(1, 0, False), NOW + 1)
    kept.close()  # writes what is still queued
    fresh_engine, fresh = SimEngine(), SimCacheFile(file)
    assert _call(fresh, fresh_engine, _payload(1, 0, False), NOW + 2).usage.read > 1000
    fresh.close()


def test_a_change_older_than_the_row_another_process_wrote_leaves_that_row(
    tmp_path: Path,
) -> None:
    """Process two used an entry at NOW + 100; process one's use of it at NOW + 50 (its
    calls started earlier, or its clock is behind) reaches the file after: the row keeps
    the later use, and its later expiry."""
    file = tmp_path / "sim-cache.db"
    payload = _payload(0, 0, True)
    one_engine, one = SimEngine(), SimCacheFile(file)
    _call(one, one_engine, payload, NOW)
    one.flush()
    two_engine, two = SimEngine(), SimCacheFile(file)
    _call(two, two_engine, payload, NOW + 100)
    two.close()

    def rows() -> dict[str, tuple[float, float]]:
        with sqlite3.connect(file) as db:
            got = db.execute("SELECT key, last_used, expires_at FROM entries").fetchall()
        return {key: (used, expires) for key, used, expires in got}

    later = rows()
    assert max(used for used, _ in later.values()) == NOW + 100
    _call(one, one_engine, payload, NOW + 50)
    one.close()
    assert rows() == later


def test_an_entry_store_counts_what_was_written_and_dropped_since_it_was_last_asked() -> None:
    """What the file saves after a call: the store's own count, not two snapshots compared."""
    store = EntryStore(max_entries=2, forget_after=86400.0, memo_capacity=2)

    def entry(at: float) -> CacheEntry:
        return CacheEntry(
            tokens=1, ttl="5m", expires_at=at + 300, available_at=at, created_at=at, last_used=at
        )

    store.put("a", entry(NOW), at=NOW)
    assert store.changes() == ({}, {})  # the first question starts the count
    store.put("b", entry(NOW + 1), at=NOW + 1)
    store.put("c", entry(NOW + 2), at=NOW + 2)  # past two entries: "a" is evicted
    assert store.changes() == ({"b": entry(NOW + 1), "c": entry(NOW + 2)}, {"a": entry(NOW)})
    assert store.changes() == ({}, {})


# -- keeping the entries in the file changes no outcome ---------------------------------


def _payload(system: int, turns: int, long_ttl: bool) -> dict[str, Any]:
    """An Anthropic request: one of two system prompts (1h or 5m marker), `turns` user and
    assistant exchanges, a rolling 5m marker on the newest user message."""
    system_block = {
        "type": "text",
        "text": f"System {system}. " + SYSTEM,
        "cache_control": {"type": "ephemeral", "ttl": "1h" if long_ttl else "5m"},
    }
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"question {n} " * 30}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {n} " * 30}]},
        ]
    last = {"type": "text", "text": "and now?", "cache_control": {"type": "ephemeral"}}
    messages.append({"role": "user", "content": [last]})
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": [system_block],
        "messages": messages,
    }


_STEP = st.one_of(
    st.just(("restart",)),
    st.tuples(
        st.just("call"),
        st.integers(0, 1),  # which system prompt
        st.integers(0, 4),  # how many earlier exchanges
        st.booleans(),  # a 1-hour marker on the system prompt
        st.sampled_from([0.0, 10.0, 200.0, 299.0, 301.0, 900.0, 3599.0, 3601.0]),
    ),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=1, max_size=12))
def test_entries_kept_in_the_file_give_the_outcomes_of_entries_kept_in_memory(
    steps: list[tuple[Any, ...]],
) -> None:
    """Random calls, gaps and process restarts: a simulator whose entries go through the
    file (and that restarts, loading them again) reports every call exactly as one that
    never left memory. (Gaps stay under the day an expired entry is remembered, where both
    forget it alike.)"""
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "sim-cache.db"
        memory = SimEngine()
        kept_engine, kept = SimEngine(), SimCacheFile(file)
        at = NOW
        for step in steps:
            if step[0] == "restart":  # a new process: a new engine, the same file
                kept.close()
                kept_engine, kept = SimEngine(), SimCacheFile(file)
                continue
            _, system, turns, long_ttl, gap = step
            at += gap
            payload = _payload(system, turns, long_ttl)
            expected: CacheOutcome = memory.handle("anthropic", payload, at=at).outcome
            engine = kept_engine
            got = kept.call(
                engine,
                "anthropic",
                "default",
                at=at,
                run=lambda e=engine, p=payload, t=at: e.handle("anthropic", p, at=t),
            ).outcome
            assert got == expected
            assert kept.in_use
            assert engine.anthropic.entries() == memory.anthropic.entries()
        kept.close()
