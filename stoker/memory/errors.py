"""Why a memory or skills operation was refused, as a small tree under `StokerError`.

The memory and skill tools raise these, and the dispatcher turns them into `is_error`
tool results, so every message is written for the model: what went wrong and the
next action that works. A refused write leaves every file byte-identical.

    MemoryStoreError        root; also a lock held too long by another writer
    ├── BudgetExceeded      the file would pass its character budget: consolidate first
    ├── EntryNotFound       old_text is in no entry
    ├── AmbiguousEntry      old_text is in more than one entry
    ├── InvalidEntry        empty text, or a line that is the entry delimiter
    ├── SkillNotFound       no skill of that name
    ├── SkillExists         create on a name that is taken
    └── InvalidSkill        a bad skill name, description or body
"""

from __future__ import annotations

from stoker.errors import StokerError


class MemoryStoreError(StokerError):
    """A memory or skills operation that was refused; nothing was written."""


class BudgetExceeded(MemoryStoreError):
    """The write would make `file` `size` characters, over its `budget`."""

    def __init__(self, file: str, size: int, budget: int) -> None:
        super().__init__(
            f"{file} would be {size:,} of {budget:,} characters; consolidate: replace or "
            "remove entries first (merge related ones, drop what is stale), then retry"
        )
        self.file = file
        self.size = size
        self.budget = budget


class EntryNotFound(MemoryStoreError):
    """No entry of the file contains the text the model quoted."""


class AmbiguousEntry(MemoryStoreError):
    """More than one entry contains the text the model quoted."""


class InvalidEntry(MemoryStoreError):
    """Text that cannot be stored as one entry."""


class SkillNotFound(MemoryStoreError):
    """No skill has the requested name."""


class SkillExists(MemoryStoreError):
    """A skill of that name already exists (create does not overwrite)."""


class InvalidSkill(MemoryStoreError):
    """A skill name, description or body that cannot be stored."""
