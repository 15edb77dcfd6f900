"""The commands a newcomer types, driven as a user would (through the CLI entry point)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.demo import TURNS, run_demo

runner = CliRunner()


async def test_demo_meets_its_promises(tmp_path: Path) -> None:
    report = await run_demo(tmp_path, clock=FrozenClock())
    main = [r.record for r in report.rows if r.label == "main"]
    assert len({r.turn for r in report.rows if r.label == "main"}) == len(TURNS) == 6
    assert main[0].usage.read == 0
    assert all(r.record.usage.hit_ratio >= 0.9 for r in report.rows[1:])
    assert [(r.label, r.after_turn, r.summary) for r in report.reviews] == [
        ("memory review", 3, "Memory updated"),
        ("skills review", 5, "Skill 'release-check' created"),
        ("memory review", 6, ""),  # the fact was already saved: nothing new
    ]
    assert all(r.read_whole_prefix and r.read_tokens > 2000 for r in report.reviews)
    memory = (tmp_path / ".stoker" / "memory" / "MEMORY.md").read_text()
    assert "The team ships on Fridays, after review (plan.md)." in memory
    assert (tmp_path / ".stoker" / "skills" / "release-check" / "SKILL.md").exists()
    assert (tmp_path / "NOTES.md").read_text() == "- release notes are drafted on Thursdays\n"
    assert report.cost_usd is not None
    assert report.uncached_cost_usd is not None
    assert report.cost_usd < report.uncached_cost_usd / 3


def test_demo_command_prints_the_table() -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "Stoker demo" in result.output
    assert result.output.count("✓ ") == 3
    assert "memory review after turn 3: Memory updated" in result.output
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


def test_bench_firstturn_counts_fetches_warm_and_cold() -> None:
    result = runner.invoke(app, ["bench", "firstturn", "--runs", "2"])
    assert result.exit_code == 0, result.output
    rows = {
        line.split("│")[1].strip(): line.split("│")[5].strip()
        for line in result.output.splitlines()
        if line.startswith("│")
    }
    assert rows == {"cold": "2", "warm": "0"}
