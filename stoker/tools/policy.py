"""What a run may call, held in a context variable.

Advertising is not allowing: every request of a session sends the same tools, because
the tool list is part of the cache key; what a particular run —
a background review, a sub-agent — may actually *call* is this policy. A fork narrows
its policy and keeps sending every tool, so it reads the parent's cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from stoker.errors import ToolError

if TYPE_CHECKING:
    from stoker.tools.tool import Tool


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchPolicy:
    """Which tool names this run may call.

    `allowed` None means every advertised tool; `deny_risky` refuses tools marked
    risky (a background run has nobody to approve them); `reason` is shown to the
    model when a call is refused, so it can carry on without retrying.
    """

    allowed: frozenset[str] | None = None
    deny_risky: bool = False
    reason: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.allowed, str):
            raise ToolError(
                f"allowed takes a collection of tool names, not the string {self.allowed!r}"
            )
        if self.allowed is not None and not isinstance(self.allowed, frozenset):
            object.__setattr__(self, "allowed", frozenset(self.allowed))

    def allows(self, name: str) -> bool:
        """Whether the name is allowed (ignoring `deny_risky`, which needs the tool)."""
        return self.allowed is None or name in self.allowed

    def denial(self, tool: Tool) -> str | None:
        """The message for the model when `tool` may not be called, else None."""
        suffix = f": {self.reason}" if self.reason else ""
        if not self.allows(tool.name):
            return f"tool {tool.name} is not allowed in this run{suffix}"
        if self.deny_risky and tool.risky:
            return f"tool {tool.name} needs approval and this run denies risky tools{suffix}"
        return None

    def narrow(self, names: Iterable[str], *, reason: str | None = None) -> DispatchPolicy:
        """A policy allowing only `names` that this one allows too: never wider."""
        if isinstance(names, str):
            raise ToolError(f"narrow() takes a collection of tool names, not the string {names!r}")
        wanted = frozenset(names)
        allowed = wanted if self.allowed is None else self.allowed & wanted
        return replace(self, allowed=allowed, reason=self.reason if reason is None else reason)

    def narrow_to(self, other: DispatchPolicy) -> DispatchPolicy:
        """The intersection of two policies (a fork's requested policy inside its parent's).

        Allowed names intersect, `deny_risky` holds if either holds, and the narrower
        side's reason wins when it has one.
        """
        allowed = self.allowed if other.allowed is None else other.allowed
        if self.allowed is not None and other.allowed is not None:
            allowed = self.allowed & other.allowed
        return DispatchPolicy(
            allowed=allowed,
            deny_risky=self.deny_risky or other.deny_risky,
            reason=other.reason or self.reason,
        )


ALLOW_ALL = DispatchPolicy()
"""The default: every advertised tool may be called, risky ones included."""

_current: ContextVar[DispatchPolicy] = ContextVar("stoker_dispatch_policy", default=ALLOW_ALL)


def current_policy() -> DispatchPolicy:
    """The policy of the running context (ALLOW_ALL unless `use_policy` set one)."""
    return _current.get()


@contextmanager
def use_policy(policy: DispatchPolicy) -> Iterator[DispatchPolicy]:
    """Make `policy` current inside the block; the previous one is restored on exit.

    It replaces, it does not intersect: to restrict a nested run relative to the
    current one, pass `current_policy().narrow_to(policy)`. Tasks and threads started
    inside the block inherit it (contextvars are copied).
    """
    token = _current.set(policy)
    try:
        yield policy
    finally:
        _current.reset(token)
