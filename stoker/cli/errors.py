"""The CLI's one error handler: a `StokerError` from any command is printed as one line
on standard error and the command exits 1; anything else is a bug and keeps its
traceback.

Commands therefore raise instead of printing: the message of a Stoker error already
says what to do, and one place decides how it looks.
"""

from __future__ import annotations

from typing import Any, NoReturn

import click
from click.exceptions import Exit
from rich.console import Console
from rich.markup import escape

from stoker.cli.options import Group
from stoker.errors import StokerError

errors = Console(stderr=True)


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print `message` as an error (no markup is read in it) and exit with `code`."""
    errors.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise Exit(code)


class Commands(Group):
    """The root group: every command and sub-command runs inside its `invoke`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StokerError as exc:
            fail(str(exc))
