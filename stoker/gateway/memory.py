"""Each gateway user's own memory: MEMORY.md and USER.md in a directory of their own, the
`memory` tool over it, and its snapshot frozen into each session the user starts.

The snapshot is taken when a session is created and stored with it like a surface
setting (`SessionSettings.memory`), so a rebuild of the session (another replica, a
restart, an evicted agent) sends the prefix it was created with, never today's memory:
what a review or the model saves shows from the user's next new session (`/new`). The
tool's spec is the same for every user; only the files it writes differ, so sessions of
different users still share one tools prefix.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from pathlib import Path

from stoker.clock import Clock, SystemClock
from stoker.memory.sections import memory_section
from stoker.memory.store import MemoryStore
from stoker.memory.tools import memory_toolset
from stoker.tools import ToolRegistry

MEMORY_TOOLSET = "memory"
REGISTRIES = 1024  # users whose registry is kept built (a rebuild is cheap)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def user_directory(root: Path, user: str) -> Path:
    """`root`/a name readable as the user's id, safe as a path, and unique per user (a
    digest tells apart ids that read the same once unsafe characters are replaced)."""
    readable = _UNSAFE.sub("_", user)[:48].strip(".") or "user"
    digest = hashlib.sha256(user.encode()).hexdigest()[:12]
    return root / f"{readable}-{digest}"


class UserMemory:
    """Per-user memory stores under one directory, and each user's tool registry."""

    def __init__(self, root: Path, *, clock: Clock | None = None) -> None:
        self.root = root
        self._clock = clock or SystemClock()
        self._registries: OrderedDict[tuple[str, int], ToolRegistry] = OrderedDict()

    def store(self, user: str) -> MemoryStore:
        return MemoryStore(user_directory(self.root, user), clock=self._clock)

    def snapshot(self, user: str) -> str:
        """The user's memory as a system prompt section ("" while it is empty)."""
        return memory_section(self.store(user))

    def registry(self, user: str, base: ToolRegistry | None) -> ToolRegistry:
        """`base`'s toolsets plus the `memory` toolset writing to the user's files (in
        place of a `memory` toolset of `base`'s, which would write one file for all)."""
        generation = base.generation if base is not None else 0
        key = (user, generation)
        registry = self._registries.get(key)
        if registry is None:
            toolsets = [t for t in base or () if t.name != MEMORY_TOOLSET]
            registry = ToolRegistry([*toolsets, memory_toolset(self.store(user))])
            self._registries[key] = registry
            while len(self._registries) > REGISTRIES:
                self._registries.popitem(last=False)
        self._registries.move_to_end(key)
        return registry
