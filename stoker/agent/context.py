"""Context variables of a running turn: which session is running tools, and how deep
in delegation it is. Tasks copy them, so concurrent sub-agents each see their own
values and a child's changes never leak into its parent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stoker.agent.session import Session

_running: ContextVar[Session | None] = ContextVar("stoker_running_session", default=None)
_depth: ContextVar[int] = ContextVar("stoker_spawn_depth", default=0)


def running_session() -> Session | None:
    """The session whose tool calls are being run in this context, if any."""
    return _running.get()


@contextmanager
def running(session: Session) -> Iterator[None]:
    token = _running.set(session)
    try:
        yield
    finally:
        _running.reset(token)


def spawn_depth() -> int:
    """0 in a root turn; n inside a sub-agent n levels down."""
    return _depth.get()


@contextmanager
def at_depth(depth: int) -> Iterator[None]:
    token = _depth.set(depth)
    try:
        yield
    finally:
        _depth.reset(token)
