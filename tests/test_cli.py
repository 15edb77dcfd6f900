"""The commands a newcomer types, driven as a user would (through the CLI entry point)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.demo import TURNS, run_demo

runner = CliRunner()


async def test_demo_meets_its_promises(tmp_path: Path) -> None:
    report = await run_demo(tmp_path, clock=FrozenClock())
    main = [r.record for r in report.rows if r.lineage == "main"]
    assert len({r.turn for r in report.rows if r.lineage == "main"}) == len(TURNS) == 6
    assert main[0].usage.read == 0
    assert all(r.record.usage.hit_ratio >= 0.9 for r in report.rows[1:])
    assert [f.label for f in report.forks] == ["memory review", "skill review"]
    assert all(f.read_whole_prefix and f.read_tokens > 1024 for f in report.forks)
    # the memory review (after turn 3) noted first, the user's own note came at turn 5
    assert (tmp_path / "NOTES.md").read_text() == (
        "- Review the conversation so far. If a fact is worth keeping, add a note.\n"
        "- release notes are drafted on Thursdays\n"
    )


def test_demo_command_prints_the_table() -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "Stoker demo" in result.output
    assert result.output.count("✓ fork") == 2
    assert "✗" not in result.output


def test_run_command_answers_one_turn(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("hello world\n")
    result = runner.invoke(app, ["run", "--workdir", str(tmp_path), "word count of 'a.md'"])
    assert result.exit_code == 0, result.output
    assert "Done. Tool results: 2" in result.output


def test_every_command_has_help() -> None:
    for args in ([], ["demo"], ["run"], ["bench"], ["bench", "overhead"]):
        result = runner.invoke(app, [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)
        assert "Usage" in result.output


def test_bench_overhead_prints_a_row_per_history_size() -> None:
    result = runner.invoke(app, ["bench", "overhead", "--turns", "3"])
    assert result.exit_code == 0, result.output
    for size in ("10", "100", "1000"):
        assert f"│ {size:>18} │" in result.output


def test_python_dash_m_stoker_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stoker", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert "demo" in done.stdout


def test_bench_resume_prints_a_row_per_size() -> None:
    result = runner.invoke(
        app, ["bench", "resume", "--runs", "1"], env={"STOKER_BENCH_DATABASE_URL": ""}
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "sqlite" in line]
    assert [r.split("│")[2].strip() for r in rows] == ["100", "1,000", "10,000"]
    assert [r.split("│")[3].strip() for r in rows] == ["67", "667", "6,667"]
