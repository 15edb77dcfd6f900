"""What a running tool may know about the call it serves.

A tool asks for it by annotating one parameter with `ToolContext`; the dispatcher
injects it, and the parameter never appears in the schema the model sees. It is a
frozen value so a tool cannot change what a concurrently running sibling sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """The session, call and run a tool invocation belongs to.

    `metadata` is copied into a read-only mapping: callers may pass any mapping and
    keep mutating their own copy without the tool seeing it change mid-call.
    """

    session_id: str
    tool_use_id: str
    run_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
