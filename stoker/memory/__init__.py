"""Memory and skills: what the agent keeps between sessions, as files the user can read.

`MemoryStore` holds MEMORY.md and USER.md (bounded lists of entries); `SkillStore`
holds a folder per skill with a SKILL.md. Their toolsets (`memory_toolset`,
`skills_toolset`) let the model read and write them; `memory_section` and
`skills_section` give the text a new session freezes into its system prompt. Every
write is atomic, serialized across processes, and logged with its provenance.

Imports only `stoker.errors`, `stoker.clock`, `stoker.wire` and `stoker.tools`.
"""

from __future__ import annotations

from stoker.memory.errors import (
    AmbiguousEntry,
    BudgetExceeded,
    EntryNotFound,
    InvalidEntry,
    InvalidSkill,
    MemoryStoreError,
    SkillExists,
    SkillNotFound,
)
from stoker.memory.provenance import (
    BACKGROUND_REVIEW,
    DIRECT,
    FOREGROUND,
    Provenance,
    WriteRecord,
    read_log,
)
from stoker.memory.sections import memory_section, skills_section
from stoker.memory.skills import Skill, SkillStore, check_skill_name
from stoker.memory.store import DELIMITER, Action, MemoryStore, MemoryWrite, Target
from stoker.memory.tools import memory_toolset, skills_toolset

__all__ = [
    "BACKGROUND_REVIEW",
    "DELIMITER",
    "DIRECT",
    "FOREGROUND",
    "Action",
    "AmbiguousEntry",
    "BudgetExceeded",
    "EntryNotFound",
    "InvalidEntry",
    "InvalidSkill",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryWrite",
    "Provenance",
    "Skill",
    "SkillExists",
    "SkillNotFound",
    "SkillStore",
    "Target",
    "WriteRecord",
    "check_skill_name",
    "memory_section",
    "memory_toolset",
    "read_log",
    "skills_section",
    "skills_toolset",
]
