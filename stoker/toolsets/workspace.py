"""A small, real toolset over one directory: list, read, search, count, and add notes.

The demo and `stoker run` use it. Paths are confined to the workspace root; a path that
escapes it is refused with a message the model can act on.
"""

from __future__ import annotations

import logging
from pathlib import Path

from stoker.tools import Tool, Toolset, tool

log = logging.getLogger(__name__)

NOTES = "NOTES.md"

# The system prompt that goes with this toolset: long enough, as real prompts are, to be
# above every model's minimum cacheable prefix together with the tools.
WORKSPACE_SYSTEM = """\
You are Stoker's workspace assistant. You help one user understand and maintain a small
folder of plain-text project notes. You can list the files, read a file, search all files
for a piece of text, count the words of a file, and (when the workspace is writable)
append a note to NOTES.md.

How to work:
- Read before you answer. When the user asks about a file, read it with read_file instead
  of guessing from its name; when the user asks where something is mentioned, use
  search_files and quote the matching lines with their file names and line numbers.
- Prefer one precise tool call over several broad ones. Do not list the files again when
  you listed them earlier in this conversation and nothing has changed since.
- Keep answers short: a sentence or two, then the facts the user asked for. Use the
  user's words for things; do not invent file names, numbers or dates.
- When a tool fails, say what failed in plain words and what you will try instead. Never
  retry the same failing call with the same arguments.
- Only add a note when the user asks for it, or when a background review decides that a
  fact is worth keeping. A note is one line, written so that it still makes sense a month
  from now, without this conversation.
- Paths are relative to the workspace root. Never ask for a path outside the workspace.

About the user: they are busy and read on a phone. Lead with the answer. If a question is
ambiguous, answer the most likely reading and say which reading you chose in a few words.
Time and date: when you need the current time, the newest user message carries it; the
date below is the day this conversation started and does not change during it.

Tool details:
- list_files returns one relative path per line, sorted. An empty workspace says so.
- read_file returns the whole file as text. Files are small; do not read a file twice in a
  row. If the file does not exist, the error names the path you asked for: check the
  listing before you try another name.
- search_files matches plain text, case-insensitive, and returns at most fifty lines as
  "path:line: text". It does not understand patterns or wildcards: search for a word that
  is likely to appear, not for a sentence.
- word_count counts words separated by white space, the way a word processor does.
- add_note appends one line to NOTES.md. It needs approval: in a background run it may be
  refused, and then you say what you would have noted instead of trying again.

Examples of good answers:
- "When do we ship?" -> read plan.md, then: "Friday, after review (plan.md, line 3)."
- "Where do we mention the changelog?" -> search for "changelog", then quote the lines.
- "How long is the plan?" -> word_count on plan.md, then: "plan.md has 24 words."
- "Remember that reviews happen on Thursdays" -> add_note with one self-contained line,
  then confirm in a few words what was noted.

Things to avoid: long introductions, restating the question, listing every tool you could
use, apologising for things that did not go wrong, and guessing at content you have not
read. When you are unsure, say what you checked and what you did not.

Privacy: the notes may mention people by name. Quote them only when the user asks about
them, never summarise what a person said in a way that changes its meaning, and do not
copy names into NOTES.md unless the user asks you to.

Formatting: plain text, no tables, no headings. Lists only when the user asks for several
items. File names in quotes, line numbers after a comma, numbers as digits. One blank line
at most between paragraphs.
"""


def _inside(root: Path, path: str) -> Path:
    target = (root / path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise ValueError(f"{path!r} is outside the workspace; use a path relative to it")
    return target


def workspace_toolset(
    root: Path | str, *, name: str = "workspace", writable: bool = True
) -> Toolset:
    """Tools bound to `root`. `add_note` (only when `writable`) is marked risky.

    A `root` that is not a folder yet is warned about, not refused: the tools look at it
    on every call, so a folder created (or mounted) later serves from then on; until
    then `list_files` says it is missing rather than empty."""
    base = Path(root)
    if not base.is_dir():
        log.warning(
            "the workspace folder %s %s: the workspace tools find no files until it is created",
            base.absolute(),
            "is not a folder" if base.exists() else "does not exist",
        )

    @tool
    def list_files() -> str:
        """List the files in the workspace, one relative path per line."""
        if not base.is_dir():
            return f"(the workspace folder {base.name or base} does not exist)"
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
