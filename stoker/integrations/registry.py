"""The toolkits an application offers, and the views sessions take of them.

Sessions see toolkits through a `ToolkitView`. `prewarm` builds one from the shared
cache alone, synchronously, when a session is created: a warm cache makes it
authoritative and turn 1 fetches nothing. `view` completes it with one fetch per
missing toolkit. `call` routes a tool call and bounds it in time, so a toolkit whose
server is down or hangs gives the model an error, never a hung turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from stoker.errors import ConfigError, ToolError
from stoker.integrations.cache import Snapshot, ToolkitCache
from stoker.integrations.errors import (
    IntegrationError,
    IntegrationTimeout,
    ToolCallFailed,
    UnknownToolkit,
)
from stoker.integrations.toolkit import IntegrationContext, Toolkit, ToolSpec
from stoker.integrations.view import ToolkitView
from stoker.tools.registry import Registry

logger = logging.getLogger(__name__)


class ToolkitRegistry(Registry[Toolkit]):
    """Toolkits by name, plus a `generation` that changes whenever they do.

    `call_timeout` bounds every `call`, whatever the toolkit does about timeouts
    itself. Like `ToolRegistry`, it is not locked: change it from the event loop.
    """

    __slots__ = ("call_timeout",)
    kind = "toolkit"

    def __init__(self, toolkits: Iterable[Toolkit] = (), *, call_timeout: float = 60.0) -> None:
        if call_timeout <= 0:
            raise ConfigError(f"call_timeout must be > 0 seconds, got {call_timeout}")
        super().__init__()
        self.call_timeout = call_timeout
        for toolkit in toolkits:
            self.register(toolkit)

    def _unknown_error(self, name: str) -> Exception:
        return UnknownToolkit(name, self._entries)

    def register(self, toolkit: Toolkit, *, replace: bool = False) -> None:
        """Add `toolkit`; a name already registered fails unless `replace` is true.

        A replaced toolkit is not closed: the caller owns it (and unregistering one
        does not close it either).
        """
        if not isinstance(toolkit, Toolkit):
            raise ToolError(f"register() takes a Toolkit, got {toolkit!r}")
        name = toolkit.name
        if not isinstance(name, str) or not name:
            raise ToolError(f"a toolkit needs a non-empty name, got {name!r}")
        self._add(name, toolkit, replace=replace)

    def prewarm(self, cache: ToolkitCache) -> ToolkitView:
        """The view the cache alone can give, without fetching or waiting.

        Authoritative when every registered toolkit has a fresh snapshot; otherwise
        the toolkits without one are `missing` and the session's first `view` fetches
        them.
        """
        found: dict[str, tuple[ToolSpec, ...]] = {}
        for name in self.names:
            snapshot = cache.peek(name)
            if snapshot is not None:
                found[name] = snapshot.tools
        return self._view(found)

    async def view(self, cache: ToolkitCache, context: IntegrationContext) -> ToolkitView:
        """The view with every missing or expired toolkit fetched: once each, all at once.

        A toolkit that cannot list its tools stays `missing` (the failure is logged and
        remembered by the cache); it never fails the view.
        """
        generation = self._generation
        toolkits = {n: self._entries[n] for n in self.names}
        found: dict[str, tuple[ToolSpec, ...]] = {}
        pending: list[Toolkit] = []
        for name, toolkit in toolkits.items():
            snapshot = cache.peek(name)
            if snapshot is None:
                pending.append(toolkit)
            else:
                found[name] = snapshot.tools
        results = await asyncio.gather(
            *(cache.get(t, context) for t in pending), return_exceptions=True
        )
        for toolkit, result in zip(pending, results, strict=True):
            if isinstance(result, Snapshot):
                found[toolkit.name] = result.tools
            elif not isinstance(result, Exception):
                raise result  # cancellation: not the toolkit's failure
        return self._view(found, toolkits, generation)

    async def call(
        self,
        toolkit_name: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        context: IntegrationContext,
    ) -> str:
        """Run one tool of one toolkit and return its result text.

        Bounded by `call_timeout`; a caller wanting less wraps it in `asyncio.timeout`.
        Failures raise, never return text: an `IntegrationError` (`UnknownToolkit`,
        `ToolkitUnavailable`, `IntegrationTimeout`, `ToolCallFailed`) whose message is
        written for the model. Raised inside a tool, the dispatcher turns it into an
        `is_error` result, which a returned string could not be.
        """
        toolkit = self.get(toolkit_name)
        limit = self.call_timeout
        try:
            async with asyncio.timeout(limit):
                return await toolkit.call_tool(tool_name, dict(arguments), context)
        except TimeoutError:
            raise IntegrationTimeout(toolkit_name, f"call {tool_name!r}", limit) from None
        except IntegrationError:
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            raise ToolCallFailed(toolkit_name, tool_name, detail) from exc

    async def close(self) -> None:
        """Close every registered toolkit; one that fails to close is logged and skipped."""
        for toolkit in self:
            try:
                await toolkit.close()
            except Exception:
                logger.exception("closing toolkit %r failed", toolkit.name)

    def _view(
        self,
        found: dict[str, tuple[ToolSpec, ...]],
        toolkits: Mapping[str, Toolkit] | None = None,
        generation: int | None = None,
    ) -> ToolkitView:
        names = self.names if toolkits is None else tuple(toolkits)
        return ToolkitView(
            toolkits=found,
            missing=tuple(n for n in names if n not in found),
            generation=self._generation if generation is None else generation,
        )
