"""A small, real toolset over one directory: list, read, search, count, and add notes.

The demo and `stoker run` use it. Paths are confined to the workspace root; a path that
escapes it is refused with a message the model can act on.
"""

from __future__ import annotations

from pathlib import Path

from stoker.tools import Tool, Toolset, tool

NOTES = "NOTES.md"


def _inside(root: Path, path: str) -> Path:
    target = (root / path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise ValueError(f"{path!r} is outside the workspace; use a path relative to it")
    return target


def workspace_toolset(
    root: Path | str, *, name: str = "workspace", writable: bool = True
) -> Toolset:
    """Tools bound to `root`. `add_note` (only when `writable`) is marked risky."""
    base = Path(root)

    @tool
    def list_files() -> str:
        """List the files in the workspace, one relative path per line."""
        files = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        return "\n".join(files) or "(the workspace is empty)"

    @tool
    def read_file(path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: Path of the file, relative to the workspace root.
        """
        return _inside(base, path).read_text(encoding="utf-8")

    @tool
    def search_files(pattern: str) -> str:
        """Find the lines of workspace files that contain a piece of text.

        Args:
            pattern: Text to look for (case-insensitive).
        """
        needle = pattern.lower()
        hits = [
            f"{p.relative_to(base).as_posix()}:{n}: {line.strip()}"
            for p in sorted(base.rglob("*"))
            if p.is_file()
            for n, line in enumerate(
                p.read_text(encoding="utf-8", errors="replace").splitlines(), 1
            )
            if needle in line.lower()
        ]
        return "\n".join(hits[:50]) or f"no line contains {pattern!r}"

    @tool
    def word_count(path: str) -> str:
        """Count the words of a workspace file.

        Args:
            path: Path of the file, relative to the workspace root.
        """
        return str(len(_inside(base, path).read_text(encoding="utf-8").split()))

    @tool(risky=True)
    def add_note(text: str) -> str:
        """Append a note to NOTES.md in the workspace.

        Args:
            text: The note, one line.
        """
        with (base / NOTES).open("a", encoding="utf-8") as fh:
            fh.write(f"- {text.strip()}\n")
        return f"noted in {NOTES}"

    tools: list[Tool] = [list_files, read_file, search_files, word_count]
    if writable:
        tools.append(add_note)
    return Toolset(name=name, tools=tools)
