"""Help as a newcomer reads it: `stoker -h` lists each command with one whole sentence,
and no option shows a type it does not take (`--save <bool>`)."""

from __future__ import annotations

import inspect
import re

from click.testing import CliRunner

from stoker.cli import app
from tests.cli_rig import every_command, every_group

runner = CliRunner()


def _listed(output: str) -> dict[str, str]:
    """The `Commands:` section of a group's help: name -> summary as printed."""
    section = output.split("Commands:\n", 1)[1]
    rows = [re.fullmatch(r"  (\S+)\s+(.*)", line) for line in section.splitlines()]
    return {row[1]: row[2] for row in rows if row}


def test_every_group_lists_each_command_with_one_whole_sentence() -> None:
    groups = every_group()
    assert {(), ("bench",), ("sessions",), ("sim",)} <= set(groups)
    for path, group in groups.items():
        result = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        listed = _listed(result.output)
        assert set(listed) == set(group.commands), path
        for name, summary in listed.items():
            command = group.commands[name]
            written = command.short_help or inspect.cleandoc(command.help or "")
            first = written.split("\n\n", 1)[0]
            # the summary is the first paragraph whole, one line of the source
            assert summary == first, (path, name, summary)
            assert "\n" not in first, (path, name, first)
            assert summary.endswith("."), (path, name, summary)


def test_no_help_shows_a_type_for_a_flag() -> None:
    paths = list(every_command())
    assert {("demo",), ("bench", "cache")} <= set(paths)
    for path in paths:
        text = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"}).output
        assert "<bool>" not in text, path
        assert "\\[" not in text, path  # rich markup escapes are not printed
    demo = runner.invoke(app, ["demo", "--help"], env={"COLUMNS": "100"}).output
    assert re.search(r"^  --save\s+Keep the session", demo, re.MULTILINE), demo
    assert re.search(r"^  -h, --help\s+Show this message and exit\.", demo, re.MULTILINE)
