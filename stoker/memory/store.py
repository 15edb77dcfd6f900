"""Memory as two bounded Markdown files the user can read and edit.

MEMORY.md holds what the agent learned (conventions, fixes, facts about the work);
USER.md holds what it knows about the user. Each file is a list of entries separated
by a line holding only the delimiter `§`:

    The deploy script is `make ship`; it runs staging first.
    §
    Tests need PYTHONHASHSEED=0 because of the set-order fixture.
    Multi-line entries are fine; blank lines inside an entry too.

`§` was chosen because it reads as a section mark, and a line holding nothing else
does not happen by accident in prose, Markdown or code (a `---` or `***` line would).
Entries are stored stripped; text containing a `§`-only line is refused.

Each file has a character budget, counted on the whole file, because the snapshot
goes into every new session's system prompt. A write that would pass the budget is
refused with a message telling the model to consolidate: nothing is ever truncated.
A write that shrinks the file is always allowed, so a file over budget (a hand edit,
a lowered budget) can be brought back step by step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from stoker.clock import Clock, SystemClock
from stoker.errors import ConfigError
from stoker.memory._files import atomic_write, locked, read_text
from stoker.memory.errors import (
    AmbiguousEntry,
    BudgetExceeded,
    EntryNotFound,
    InvalidEntry,
    MemoryStoreError,
)
from stoker.memory.provenance import Provenance, WriteRecord, log_write, read_log

logger = logging.getLogger(__name__)

Target = Literal["memory", "user"]
Action = Literal["add", "replace", "remove"]
TARGETS: tuple[Target, ...] = get_args(Target)
FILES: Mapping[Target, str] = {"memory": "MEMORY.md", "user": "USER.md"}
DELIMITER = "§"
DEFAULT_MEMORY_BUDGET = 2_200
DEFAULT_USER_BUDGET = 1_400
LOG_FILE = "memory.log.jsonl"

_TITLES: Mapping[Target, str] = {
    "memory": "MEMORY.md: what you learned",
    "user": "USER.md: about the user",
}


def parse_entries(text: str) -> tuple[str, ...]:
    """The entries of a file's text: split on `§`-only lines, stripped, empty ones dropped."""
    entries: list[str] = []
    current: list[str] = []
    for line in [*text.splitlines(), DELIMITER]:
        if line.strip() == DELIMITER:
            entry = "\n".join(current).strip()
            if entry:
                entries.append(entry)
            current = []
        else:
            current.append(line.rstrip())
    return tuple(entries)


def render_entries(entries: tuple[str, ...]) -> str:
    """The file text for `entries` ("" for none); `parse_entries` reads it back exactly."""
    return f"\n{DELIMITER}\n".join(entries) + "\n" if entries else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWrite:
    """What a write did: the file's size after it, and whether anything changed (an add
    of an entry that is already there changes nothing and is not logged)."""

    target: Target
    action: Action
    file: str
    size: int
    budget: int
    changed: bool = True


class MemoryStore:
    """MEMORY.md, USER.md and their provenance log in one directory.

    The directory is given (`Config.memory_dir` is `memory/` in the Stoker home); it is
    created on the first write. Reads see writes at
    once (tools must); a session freezes `snapshot()` once, when it is created, so its
    system prompt never moves (see `stoker.memory.sections`).
    """

    __slots__ = ("_budgets", "_clock", "directory")

    def __init__(
        self,
        directory: Path | str,
        *,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        user_budget: int = DEFAULT_USER_BUDGET,
        clock: Clock | None = None,
    ) -> None:
        for name, value in (("memory_budget", memory_budget), ("user_budget", user_budget)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive number of characters, got {value!r}")
        self.directory = Path(directory)
        self._budgets: dict[Target, int] = {"memory": memory_budget, "user": user_budget}
        self._clock: Clock = clock if clock is not None else SystemClock()

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.directory)!r})"

    def path(self, target: Target) -> Path:
        return self.directory / FILES[_check_target(target)]

    def budget(self, target: Target) -> int:
        return self._budgets[_check_target(target)]

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_FILE

    def entries(self, target: Target) -> tuple[str, ...]:
        """The current entries, read from disk now (hand edits included)."""
        return parse_entries(read_text(self.path(target)))

    def read_log(self) -> list[WriteRecord]:
        """Every logged write, oldest first."""
        return read_log(self.log_path)

    def add(
        self, target: Target, text: str, *, provenance: Provenance | None = None
    ) -> MemoryWrite:
        """Append an entry; adding one that is already there is a no-op."""
        entry = _check_entry(text, "text")

        def edit(entries: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]] | None:
            if entry in entries:
                return None
            return (*entries, entry), {"text": entry}

        return self._write(target, "add", edit, provenance)

    def replace(
        self, target: Target, old_text: str, new_text: str, *, provenance: Provenance | None = None
    ) -> MemoryWrite:
        """Replace the one entry containing `old_text` with `new_text` (the whole new entry)."""
        entry = _check_entry(new_text, "new_text")

        def edit(entries: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
            i = _find(target, entries, old_text)
            new = (*entries[:i], entry, *entries[i + 1 :])
            return new, {"old_text": entries[i], "new_text": entry}

        return self._write(target, "replace", edit, provenance)

    def remove(
        self, target: Target, old_text: str, *, provenance: Provenance | None = None
    ) -> MemoryWrite:
        """Remove the one entry containing `old_text`."""

        def edit(entries: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
            i = _find(target, entries, old_text)
            return (*entries[:i], *entries[i + 1 :]), {"old_text": entries[i]}

        return self._write(target, "remove", edit, provenance)

    def snapshot(self) -> str:
        """Both files as a system-prompt section ("" when both are empty).

        Call it once per session, when the session is created: the returned string is
        what that session's prompt keeps, whatever is written afterwards.
        """
        parts = []
        for target in TARGETS:
            text = render_entries(self.entries(target))
            if text:
                usage = f"{len(text):,} of {self.budget(target):,} characters"
                parts.append(f"## {_TITLES[target]} ({usage})\n{text.rstrip()}")
        if not parts:
            return ""
        header = (
            "# Memory\n"
            "Saved with the memory tool and frozen when this session started: edits apply to "
            "the files at once and appear here from the next session. Entries are separated "
            f"by lines holding only {DELIMITER}."
        )
        return "\n\n".join([header, *parts])

    def _write(
        self,
        target: Target,
        action: Action,
        edit: Callable[[tuple[str, ...]], tuple[tuple[str, ...], dict[str, str]] | None],
        provenance: Provenance | None,
    ) -> MemoryWrite:
        """Read, edit, check the budget and write, all under the directory lock."""
        path = self.path(target)
        budget = self.budget(target)
        with locked(self.directory):
            entries = parse_entries(read_text(path))
            size = len(render_entries(entries))
            edited = edit(entries)
            if edited is not None:
                new_entries, texts = edited
                text = render_entries(new_entries)
                if len(text) > budget and len(text) > size:
                    raise BudgetExceeded(path.name, len(text), budget)
                atomic_write(path, text)
                log_write(
                    self.log_path,
                    self._clock,
                    target=target,
                    action=action,
                    provenance=provenance,
                    **texts,
                )
                logger.debug("%s %s: %d characters", action, path, len(text))
                size = len(text)
        return MemoryWrite(
            target=target,
            action=action,
            file=path.name,
            size=size,
            budget=budget,
            changed=edited is not None,
        )


def _check_target(target: object) -> Target:
    if target not in TARGETS:
        raise MemoryStoreError(
            f"unknown memory target {target!r}: use 'memory' (MEMORY.md, what you learned) "
            "or 'user' (USER.md, about the user)"
        )
    return target


def _check_entry(text: object, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidEntry(f"{what} is empty; give the entry's text (to delete one, use remove)")
    if any(line.strip() == DELIMITER for line in text.splitlines()):
        raise InvalidEntry(
            f"{what} has a line holding only {DELIMITER!r}, the entry delimiter; "
            "add separate entries instead"
        )
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _find(target: Target, entries: tuple[str, ...], old_text: str) -> int:
    """The index of the one entry containing `old_text`, else an error listing candidates."""
    needle = old_text.strip() if isinstance(old_text, str) else ""
    if not needle:
        raise InvalidEntry("old_text is empty; quote a short, distinctive part of the entry")
    hits = [i for i, entry in enumerate(entries) if needle in entry]
    if len(hits) == 1:
        return hits[0]
    file = FILES[target]
    if not hits:
        listing = _previews(entries) if entries else f"({file} has no entries)"
        raise EntryNotFound(
            f"no entry of {file} contains {needle!r}; quote text from one of the current "
            f"entries (they may have changed since the session started):\n{listing}"
        )
    raise AmbiguousEntry(
        f"{needle!r} is in {len(hits)} entries of {file}; quote more of the one you mean:\n"
        + _previews(tuple(entries[i] for i in hits))
    )


def _previews(entries: tuple[str, ...], width: int = 100) -> str:
    lines = []
    for entry in entries:
        flat = " ".join(entry.split())
        lines.append(f"- {flat if len(flat) <= width else flat[: width - 1] + '…'}")
    return "\n".join(lines)
