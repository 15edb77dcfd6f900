"""The `stoker` command. Each command parses, calls one library function, renders with rich."""

from __future__ import annotations

from stoker.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
