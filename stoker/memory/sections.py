"""The memory snapshot and the skills index, as sections of a new session's system prompt.

The system prompt is part of the cached prefix, so a session takes these strings once,
when it is created, and passes them to `build_system_prompt(..., sections=...)`:

    sections = (memory_section(memory), skills_section(skills))
    system = build_system_prompt(base, clock=clock, sections=sections)

They are plain strings, read from disk at the call: writes made during the session go
to the files at once (the tools read the files, not the prompt) and reach the prompt of
the *next* session. Re-taking them mid-session would rewrite the whole prefix.
"""

from __future__ import annotations

from stoker.memory.skills import SkillStore
from stoker.memory.store import MemoryStore


def memory_section(store: MemoryStore) -> str:
    """MEMORY.md and USER.md as a prompt section ("" when both are empty)."""
    return store.snapshot()


def skills_section(store: SkillStore) -> str:
    """The skills index as a prompt section ("" when there are no skills)."""
    index = store.index()
    if not index:
        return ""
    return (
        "# Skills\n"
        "Procedures saved in earlier sessions, one per line as name: description. Before "
        "following one, load it with skill_view; create or fix them with skill_manage.\n"
        f"{index}"
    )
