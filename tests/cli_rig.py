"""What the command-line tests share: `stoker chat` typed into in a folder that holds
its sessions (`s.db`), and the session id a chat prints as it ends."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from stoker.cli import app

runner = CliRunner()


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
