"""The CLI as a hand uses it: every command's help, ids that fit any terminal and may be
shortened, JSON for scripts, chat commands answered locally, turn numbers that count on,
and `stoker serve` showing how to add a user."""

from __future__ import annotations

import asyncio
import io
import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from stoker.cli import app
from stoker.cli.sessions import sessions_table
from stoker.errors import AmbiguousSessionId, SessionNotFound
from stoker.gateway import load_config
from stoker.gateway.auth import token_digest
from stoker.session_ids import MIN_LENGTH, name_in, pick, short_ids
from stoker.session_views import show_session
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from stoker.wire.figures import json_usd
from stoker.wire.stored import SessionSummary
from tests.cli_rig import chat, every_command, runner, session_id
from tests.helpers import sim_agent


def test_every_command_and_subcommand_has_help() -> None:
    commands = every_command()
    assert {("sessions", "show"), ("chat",), ("serve",), ("bench", "cache")} <= set(commands)
    for path, command in commands.items():
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage" in result.output, path
        summary = (command.help or "").split("\n")[0].strip()
        assert summary, f"{path} has no help text"
        assert summary.split()[0] in result.output, path


def _store_sessions(db: Path, ids: list[str]) -> None:
    async def make() -> None:
        async with SQLiteStore(db) as store:
            agent, _ = sim_agent()
            for sid in ids:
                session = await agent.open(store, sid)
                await session.send(f"hello from {sid}")

    asyncio.run(make())


def test_sessions_are_named_by_a_unique_start_of_their_id(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    _store_sessions(tmp_path / "s.db", ["alpha-one", "alpha-two", "beta"])

    def sessions(*args: str, exit_code: int = 0) -> str:
        out = runner.invoke(app, ["sessions", *args, "--db", db])
        assert out.exit_code == exit_code, out.output
        return out.output

    listed = sessions("list")
    for short in ("alpha-on", "alpha-tw", "beta"):
        assert f" {short} " in listed

    assert "1. hello from alpha-two" in sessions("show", "alpha-t")
    assert "hello from beta" in sessions("export", "be")

    ambiguous = sessions("show", "alpha", exit_code=1)
    assert "'alpha' starts more than one session id: alpha-one, alpha-two" in ambiguous
    assert "Traceback" not in ambiguous
    sessions("rm", "alpha", exit_code=1)

    assert "removed alpha-one" in sessions("rm", "alpha-o")
    assert "no session 'alpha-one'" in sessions("show", "alpha-one", exit_code=1)
    sessions("show", "alpha")  # the only one left that starts so


_IDS = st.lists(st.text(alphabet="ab.-1", min_size=1, max_size=12), min_size=1, unique=True)


@given(ids=_IDS)
def test_each_short_id_names_its_session_and_no_other(ids: list[str]) -> None:
    short = short_ids(ids, ids)
    for sid, prefix in short.items():
        assert len(prefix) >= min(MIN_LENGTH, len(sid)) or "." in prefix
        assert name_in(prefix, sorted(ids)) == sid
        if sid.startswith(prefix):  # a start of the id: the store's own lookup agrees
            assert pick(prefix, [other for other in ids if other.startswith(prefix)]) == sid


def test_a_start_of_several_ids_is_a_clear_error_and_of_none_is_not_found() -> None:
    with pytest.raises(AmbiguousSessionId) as ambiguous:
        pick("ab", ["abd", "abc"])
    assert ambiguous.value.candidates == ["abc", "abd"]
    with pytest.raises(SessionNotFound) as missing:
        pick("zz", [])
    assert missing.value.session_id == "zz"
    assert pick("ab", ["ab", "ab.review-1"]) == "ab"  # a whole id names itself


_HEX = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(_HEX, min_size=1, max_size=6, unique=True), width=st.integers(20, 220))
def test_the_list_shows_every_short_id_whole_at_any_width(ids: list[str], width: int) -> None:
    rows = [
        SessionSummary(
            id=sid,
            role="main",
            parent_id=None,
            created_at=1_790_000_000.0,
            updated_at=1_790_000_000.0,
            model="claude-sonnet-4-6",
            message_count=12,
            title="a long first message that needs the whole width and more " * 2,
        )
        for sid in ids
    ]
    short = short_ids(ids, ids)
    out = io.StringIO()
    Console(file=out, width=width).print(sessions_table(rows, short, width))
    assert "title" in out.getvalue()  # a table, not the fallback, at every width tried
    lines = out.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)
    for sid in ids:
        assert any(f" {short[sid]} " in line for line in lines), (width, short[sid])


def test_list_and_show_as_json(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    _store_sessions(tmp_path / "s.db", ["alpha-one", "alpha-two"])
    listed = runner.invoke(app, ["sessions", "list", "--json", "--db", db])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert sorted((r["id"], r["short_id"], r["title"]) for r in rows) == [
        ("alpha-one", "alpha-on", "hello from alpha-one"),
        ("alpha-two", "alpha-tw", "hello from alpha-two"),
    ]

    shown = runner.invoke(app, ["sessions", "show", "alpha-tw", "--json", "--db", db])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)

    async def stored() -> object:
        async with SQLiteStore(tmp_path / "s.db") as store:
            return await show_session(store, "alpha-two")

    view = asyncio.run(stored())
    assert data["id"] == "alpha-two"
    assert [(t["number"], t["user"]) for t in data["turns"]] == [(1, "hello from alpha-two")]
    records = [r for t in data["turns"] for r in t["requests"]]
    assert len(records) == len(view.turns[0].records)  # type: ignore[attr-defined]
    assert data["usage"]["read"] == sum(r["usage"]["read"] for r in records)
    assert data["cost_usd"] == json_usd(view.cost_usd)  # type: ignore[attr-defined]


def _stored_turns(db: Path, sid: str) -> list[str]:
    async def turns() -> list[str]:
        async with SQLiteStore(db) as store:
            return [t.user for t in (await show_session(store, sid)).turns]

    return asyncio.run(turns())


def test_chat_answers_its_commands_itself_and_shows_tools_running(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    (tmp_path / "notes.md").write_text("ship on friday\n")
    lines = [
        "/help",
        "/usage",
        "/model",
        "/model no-such-model",
        "/bogus",
        "word count of 'notes.md'",
        "/usage",
        "//etc is where the configs live",
        "/exit",
        "this line comes after /exit and is never sent",
    ]
    out = chat(tmp_path, "\n".join(lines) + "\n")
    text = out.output
    for name in ("/help", "/usage", "/model"):
        assert f"  {name} " in text
    assert "  /exit, /quit leave" in text  # an alias on its command's line, not a second one
    assert "0 calls · read 0" in text  # /usage before any turn
    assert "model: claude-sonnet-4-6" in text
    assert "unknown model 'no-such-model'" in text
    assert "unknown command /bogus: /help lists them" in text
    assert "… word_count running" in text
    assert "✓ word_count done" in text
    assert "saved $" in text
    # only the two messages reached the model; the command lines are not in the history
    assert _stored_turns(db, session_id(text)) == [
        "word count of 'notes.md'",
        "/etc is where the configs live",
    ]


def test_chat_model_switch_is_one_declared_break(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    out = chat(tmp_path, "hello\n/model claude-opus-4-6\nagain\n")
    assert "model set to claude-opus-4-6" in out.output

    async def records() -> list[tuple[str, str]]:
        async with SQLiteStore(db) as store:
            view = await show_session(store, session_id(out.output))
        return [(r.model, r.explanation.verdict) for t in view.turns for r in t.records]

    assert asyncio.run(records())[-1] == ("claude-opus-4-6", "declared")
    # resumed without --model, the session goes on with the model it switched to
    again = runner.invoke(
        app,
        ["chat", "--db", str(db), "--workdir", str(tmp_path), "--resume", session_id(out.output)],
        input="/model\n",
    )
    assert again.exit_code == 0, again.output
    assert "model: claude-opus-4-6" in again.output


def test_run_numbers_turns_on_across_calls_in_one_session(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    numbers = []
    for prompt in ("first question", "second question", "third question"):
        out = runner.invoke(app, ["run", "--session", "work", "--db", db, prompt])
        assert out.exit_code == 0, out.output
        row = next(line for line in out.output.splitlines() if "│ main" in line)
        numbers.append(row.split("│")[3].strip())
    assert numbers == ["1", "2", "3"]


def test_serve_without_users_prints_a_config_that_loads(tmp_path: Path) -> None:
    out = runner.invoke(app, ["serve"], env={"STOKER_GATEWAY_TOKENS": ""})
    assert out.exit_code == 1
    assert "no users configured" in out.output
    example = out.output[: out.output.index("error:")]
    assert "[[users]]" in example
    parsed = tomllib.loads(example)
    assert parsed["users"][0]["id"] == "alice"
    digest = token_digest("a-token-for-alice")
    config = tmp_path / "gateway.toml"
    config.write_text(example.replace("REPLACE-WITH-THE-SHA256-OF-A-TOKEN", digest))
    loaded = load_config(config, env={})
    assert loaded.tokens.user_for("Bearer a-token-for-alice") == "alice"


async def test_store_finds_ids_by_a_case_sensitive_start(store: SqlEventStore) -> None:
    agent, _ = sim_agent()
    for sid in ("Abc-1", "abc-2", "abc-3", "ab_c"):
        await agent.open(store, sid)
    assert sorted(await store.session_ids("abc")) == ["abc-2", "abc-3"]
    assert await store.session_ids("A") == ["Abc-1"]
    assert await store.session_ids("ab%") == []  # no wildcards: a start is literal text
    assert await store.session_ids("ab_") == ["ab_c"]
    assert sorted(await store.session_ids()) == ["Abc-1", "ab_c", "abc-2", "abc-3"]


def test_chat_usage_counts_the_calls_of_earlier_processes_too(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    (tmp_path / "notes.md").write_text("ship on friday\n")
    first = chat(tmp_path, "word count of 'notes.md'\n")
    sid = session_id(first.output)

    async def stored_calls() -> int:
        async with SQLiteStore(db) as store:
            return len((await show_session(store, sid)).records)

    calls = asyncio.run(stored_calls())
    assert calls >= 2  # the tool call and the answer
    again = chat(tmp_path, "/usage\n", "--resume", sid[:10])
    assert f"{calls} calls · read " in again.output


def test_chat_compact_summarises_locally_and_the_next_turn_is_a_declared_break(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    lines = ["/compact", "first", "second", "third", "/compact", "fourth"]
    out = chat(tmp_path, "\n".join(lines) + "\n")
    assert "nothing to compact" in out.output  # before any turn
    assert "compacted: 6 messages became 4" in out.output

    async def view() -> tuple[list[str], list[str | None]]:
        async with SQLiteStore(db) as store:
            sid = session_id(out.output)
            stored = await store.load(sid)
            shown = await show_session(store, sid)
        records = [r.declared_break for t in shown.turns for r in t.records]
        assert shown.rebases == ("compaction: /compact",)
        return [m.text for m in stored.messages], records

    messages, breaks = asyncio.run(view())
    assert messages[0].startswith("Summary of the earlier part")
    assert messages[-2] == "fourth"
    assert breaks[-1] == "compaction: /compact"


def test_chat_help_names_every_command_it_answers_itself() -> None:
    from stoker.cli.slash import COMMANDS

    text = " ".join(
        CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "200"}).output.split()
    )
    aliases = {"quit"}  # /quit is /exit's other name
    assert [n for n in COMMANDS if n not in aliases and f"/{n}" not in text] == []
