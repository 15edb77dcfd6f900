"""Which commands make the session database: one that stores sessions creates a SQLite
file that does not exist (folders too); one that only reads never does. A path that was
named and does not exist (a typo) is one error naming it, and nothing is made; the
default database, before any session, has no sessions yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker.cli import app
from tests.cli_rig import runner

READERS = [
    ["report", "--all"],
    ["report", "abc"],
    ["report-proxy"],
    ["sessions", "list"],
    ["sessions", "show", "abc"],
    ["sessions", "export", "abc"],
    ["sessions", "rm", "abc"],
    ["chat", "--resume", "abc"],
]


def _env(home: Path, **more: str) -> dict[str, str]:
    """A home of the test's own, and no database named but what the test names."""
    return {"STOKER_HOME": str(home), "STOKER_DB": "", "STOKER_DATABASE_URL": "", **more}


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_read_command_refuses_a_named_database_that_does_not_exist(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "typo" / "x.db"
    out = runner.invoke(app, [*command, "--db", str(typo)], env=_env(tmp_path / "home"))
    assert out.exit_code == 1, out.output
    assert out.output.startswith(f"error: no session database at {typo} (from --db)")
    assert f"`stoker chat --db {typo}`" in out.output  # how to make one there
    assert not typo.parent.exists()  # neither the file nor its folder
    assert not (tmp_path / "home").exists()


def test_a_database_named_by_stoker_db_is_refused_the_same_way(tmp_path: Path) -> None:
    typo = tmp_path / "typo" / "x.db"
    out = runner.invoke(app, ["sessions", "list"], env=_env(tmp_path, STOKER_DB=str(typo)))
    assert out.exit_code == 1
    assert out.output.startswith(f"error: no session database at {typo} (from STOKER_DB)")
    assert not typo.parent.exists()


def test_a_write_command_creates_a_missing_database_and_its_folders(tmp_path: Path) -> None:
    db = tmp_path / "new" / "folder" / "s.db"
    ran = runner.invoke(
        app, ["run", "--session", "plan", "--db", str(db), "hello"], env=_env(tmp_path / "home")
    )
    assert ran.exit_code == 0, ran.output
    assert db.is_file()
    listed = runner.invoke(
        app, ["sessions", "list", "--json", "--db", str(db)], env=_env(tmp_path / "home")
    )
    assert [s["id"] for s in json.loads(listed.output)] == ["plan"]


def test_a_fresh_home_has_no_sessions_yet_and_reading_it_creates_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    said = f"no sessions yet in {home / 'stoker.db'}: `stoker chat` stores one"
    for command in (["report", "--all"], ["sessions", "list"]):
        out = runner.invoke(app, command, env=_env(home))
        assert out.exit_code == 0, out.output
        assert out.output.startswith(said), out.output
    listed = runner.invoke(app, ["sessions", "list", "--json"], env=_env(home))
    assert (listed.exit_code, json.loads(listed.output)) == (0, [])
    report = runner.invoke(app, ["report", "--all", "--json"], env=_env(home))
    assert (report.exit_code, json.loads(report.output)["lineages"]) == (0, [])
    shown = runner.invoke(app, ["sessions", "show", "abc"], env=_env(home))
    assert shown.exit_code == 1
    assert shown.output.startswith("error: no session 'abc' in this store")
    assert not home.exists()


def test_the_default_database_once_written_is_read_as_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ran = runner.invoke(app, ["run", "--session", "plan", "hello"], env=_env(home))
    assert ran.exit_code == 0, ran.output
    assert (home / "stoker.db").is_file()
    listed = runner.invoke(app, ["sessions", "list", "--json"], env=_env(home))
    assert [s["id"] for s in json.loads(listed.output)] == ["plan"]
