"""What the command-line tests share: `stoker chat` typed into in a folder that holds
its sessions (`s.db`), the session id a chat prints as it ends, and every command and
group of `stoker` by its path."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner, Result

from stoker.cli import app

runner = CliRunner()


def every_command(
    group: click.Group = app, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], click.Command]:
    """Every command and group below `group` (itself included) by its path, the root
    first: `("sessions", "show")` is `stoker sessions show`."""
    found: dict[tuple[str, ...], click.Command] = {path: group}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= every_command(command, (*path, name))
        else:
            found[(*path, name)] = command
    return found


def every_group() -> dict[tuple[str, ...], click.Group]:
    """Every group of `stoker` by its path, the root (`()`) first."""
    return {p: c for p, c in every_command().items() if isinstance(c, click.Group)}


def chat(workdir: Path, typed: str, *options: str) -> Result:
    """`stoker chat` in `workdir`, stored in `workdir / "s.db"`, with `typed` as its
    input; it must exit 0."""
    args = ["chat", "--db", str(workdir / "s.db"), "--workdir", str(workdir), *options]
    out = runner.invoke(app, args, input=typed)
    assert out.exit_code == 0, out.output
    return out


def session_id(output: str) -> str:
    """The id in the `stoker chat --resume ID` line a chat ends with."""
    return output.rsplit("stoker chat --resume ", 1)[1].split()[0]
