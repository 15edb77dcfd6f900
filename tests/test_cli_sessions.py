"""`stoker chat`, `stoker sessions ...` as a user drives them, on a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from stoker.agent.keepwarm import KeepWarm
from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.session_views import show_session
from stoker.store.sqlite import SQLiteStore
from tests.cli_rig import chat, runner, session_id
from tests.helpers import make_registry, sim_agent


def test_chat_then_list_show_export_resume_and_remove(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    (tmp_path / "notes.md").write_text("ship on friday\n")
    first = chat(tmp_path, "word count of 'notes.md'\nthanks\n/exit\n")
    assert "Done. Tool results: 3" in first.output
    sid = session_id(first.output)
    listed = runner.invoke(app, ["sessions", "list", "--db", str(db)])
    assert listed.exit_code == 0, listed.output
    assert sid[:8] in listed.output

    shown = runner.invoke(app, ["sessions", "show", sid, "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "1. word count of 'notes.md'" in shown.output
    assert "tools: word_count" in shown.output
    assert "2. thanks" in shown.output
    assert "· why: hit\n" in shown.output  # turn 2 read what turn 1 wrote

    resumed = chat(tmp_path, "and again\n", "--resume", sid)
    assert (
        "hit" in resumed.output
    )  # the resumed call read the stored prefix's cache? no: new process
    exported = runner.invoke(app, ["sessions", "export", sid, "--db", str(db)])
    events = [json.loads(line) for line in exported.output.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "session_created"
    assert sum(e["type"] == "message_appended" for e in events) == 8

    removed = runner.invoke(app, ["sessions", "rm", sid, "--db", str(db)])
    assert removed.exit_code == 0
    assert runner.invoke(app, ["sessions", "show", sid, "--db", str(db)]).exit_code == 1


def test_resume_with_an_unknown_id_is_a_clear_error(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "s.db").close()  # a database, with no session in it
    out = runner.invoke(app, ["chat", "--db", str(tmp_path / "s.db"), "--resume", "nope"], input="")
    assert out.exit_code == 1
    assert "no session 'nope'" in out.output


def test_run_with_a_session_id_continues_that_stored_session(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    for prompt in ("first question", "second question"):
        out = runner.invoke(app, ["run", "--session", "work", "--db", db, prompt])
        assert out.exit_code == 0, out.output
    shown = runner.invoke(app, ["sessions", "show", "work", "--db", db])
    assert "1. first question" in shown.output
    assert "2. second question" in shown.output


async def test_titles_and_views_show_the_users_words_not_the_notes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        agent, _ = sim_agent(registry=make_registry())
        session = agent.session(store=store)
        await session.send("what is new?", note="Current time: 10:42")
        (summary,) = await store.list_sessions()
        view = await show_session(store, session.id)
    finally:
        await store.close()
    assert summary.title == "what is new?"
    assert view.turns[0].user == "what is new?"


def test_show_lists_keep_warm_apart_from_the_turns(tmp_path: Path) -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(registry=make_registry(), clock=clock)

    async def idle_session() -> tuple[Any, Any, Any]:
        async with SQLiteStore(tmp_path / "s.db") as store:
            session = await agent.open(store, "idle-session")
            scheduler = KeepWarm(clock)
            scheduler.watch(session)
            await session.send("read_file 'plan.md'")
            (seal,) = await scheduler.idle(6 * 60)
            await session.send("back again")
            return session, seal, await show_session(store, session.id)

    session, seal, view = asyncio.run(idle_session())
    assert [len(t.records) for t in view.turns] == [2, 1]
    assert view.turns[0].keep_warm == [seal]
    assert view.usage.read == sum(r.usage.read for r in session.records)  # all billed calls
    shown = runner.invoke(app, ["sessions", "show", "idle-session", "--db", tmp_path / "s.db"])
    assert shown.exit_code == 0, shown.output
    assert "keep-warm seal" in shown.output
    assert "keep-warm: 1 request," in shown.output


def test_chat_asks_before_a_risky_tool_and_show_lists_each_decision(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    out = chat(tmp_path, "add_note 'ship on friday'\ny\nadd_note 'and on monday'\n\n/exit\n")
    assert 'Allow add_note(text="ship on friday")? [y/N]' in out.output
    assert 'Allow add_note(text="and on monday")? [y/N]' in out.output
    assert "Done. Tool results: noted in NOTES.md" in out.output
    assert "Done. Tool results: the user denied add_note (user:" in out.output
    assert (tmp_path / "NOTES.md").read_text() == "- ship on friday\n"  # only the first ran
    shown = runner.invoke(app, ["sessions", "show", session_id(out.output), "--db", str(db)])
    lines = [line.strip() for line in shown.output.splitlines() if "approval:" in line]
    who = lines[0].rsplit(" by ", 1)[1] if lines else ""
    assert who.startswith("user:")
    assert lines == [
        f'approval: approved add_note(text="ship on friday") by {who}',
        f'approval: denied add_note(text="and on monday") by {who}',
    ]


def test_chat_denies_a_risky_tool_when_the_input_ends_at_the_question(tmp_path: Path) -> None:
    out = runner.invoke(
        app,
        ["chat", "--db", str(tmp_path / "s.db"), "--workdir", str(tmp_path)],
        input="add_note 'ship on friday'\n",
    )
    assert out.exit_code == 0, out.output
    assert "add_note was not approved (no approver): the input ended." in out.output
    assert not (tmp_path / "NOTES.md").exists()
