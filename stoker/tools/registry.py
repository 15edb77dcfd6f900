"""The registry of toolsets, and the one place a run's tool list is resolved.

`resolve` is deterministic whatever the registration order: the tools it returns
become the `tools` of the request prefix, and a different order is a full cache miss
(docs/cache-breakers.md, "Tool order"). Forks and sub-agents must reuse the parent's
resolved tuple, not resolve again with other toolsets (docs/cache-breakers.md, "Forks and
sub-agents that differ from the parent").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from stoker.errors import ToolError
from stoker.tools.tool import Tool
from stoker.tools.toolset import Toolset

T = TypeVar("T")


class Registry(Generic[T]):
    """Values by name, plus a `generation` that changes whenever they do: what the
    registries of toolsets and of toolkits (`stoker.integrations`) share. Not locked:
    change it from one thread (the event loop's), like the rest of a gateway's state."""

    __slots__ = ("_entries", "_generation")
    kind = "entry"  # what an entry is called in errors

    def __init__(self) -> None:
        self._entries: dict[str, T] = {}
        self._generation = 0

    @property
    def generation(self) -> int:
        """Incremented by every register/unregister; equal generations mean equal contents."""
        return self._generation

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        return iter([self._entries[n] for n in self.names])

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> T:
        """The entry called `name`; `_unknown_error` otherwise."""
        try:
            return self._entries[name]
        except KeyError:
            raise self._unknown_error(name) from None

    def _unknown_error(self, name: str) -> Exception:
        raise NotImplementedError

    def _add(self, name: str, entry: T, *, replace: bool) -> None:
        if name in self._entries and not replace:
            raise ToolError(
                f"a {self.kind} named {name!r} is already registered; pass replace=True to swap it"
            )
        self._entries[name] = entry
        self._generation += 1

    def unregister(self, name: str) -> T:
        """Remove and return the entry called `name`."""
        entry = self.get(name)
        del self._entries[name]
        self._generation += 1
        return entry


class ToolRegistry(Registry[Toolset]):
    """Toolsets by name, plus a `generation` that changes whenever they do.

    The registry is mutable (integrations connect and disconnect); a gateway keys its
    caches of resolved tools on `generation`. It is not locked: change it from one
    thread (the event loop's), like the rest of a gateway's state.
    """

    __slots__ = ()
    kind = "toolset"

    def __init__(self, toolsets: Iterable[Toolset] = ()) -> None:
        super().__init__()
        for toolset in toolsets:
            self.register(toolset)

    def _unknown_error(self, name: str) -> Exception:
        return ToolError(self._unknown([name]))

    def register(self, toolset: Toolset, *, replace: bool = False) -> None:
        """Add `toolset`; a name already registered fails unless `replace` is true."""
        if not isinstance(toolset, Toolset):
            raise ToolError(f"register() takes a Toolset, got {toolset!r}")
        self._add(toolset.name, toolset, replace=replace)

    def resolve(
        self, enabled: Iterable[str] | None = None, disabled: Iterable[str] = ()
    ) -> tuple[Tool, ...]:
        """The tools of the `enabled` toolsets (None: all) minus `disabled`, sorted by name.

        Unknown toolset names fail (in either list: a typo in `disabled` would otherwise
        silently send a wider tool list). The same tool in two selected toolsets is fine
        when both define it identically; different definitions under one name fail.
        """
        wanted = self.names if enabled is None else _names(enabled, "enabled")
        dropped = set(_names(disabled, "disabled"))
        unknown = sorted({n for n in (*wanted, *dropped) if n not in self._entries})
        if unknown:
            raise ToolError(self._unknown(unknown))
        return self._tools(set(wanted) - dropped)

    def available(
        self, enabled: Iterable[str] | None = None, disabled: Iterable[str] = ()
    ) -> tuple[Tool, ...]:
        """What `resolve` gives, minus the selected toolsets that are not registered now.

        For sessions that already have their tools: a toolset they name that is missing
        is down (its server, or this replica's start), not misspelled, and is no reason
        to refuse the whole list. Names are checked where a new prefix is built
        (`resolve`).
        """
        wanted = self.names if enabled is None else _names(enabled, "enabled")
        dropped = set(_names(disabled, "disabled"))
        return self._tools({n for n in wanted if n in self._entries} - dropped)

    def _tools(self, selected: set[str]) -> tuple[Tool, ...]:
        found: dict[str, tuple[Tool, str]] = {}
        for set_name in sorted(selected):
            for t in self._entries[set_name].tools:
                seen = found.get(t.name)
                if seen is None:
                    found[t.name] = (t, set_name)
                elif seen[0] != t:
                    raise ToolError(
                        f"toolsets {seen[1]!r} and {set_name!r} both define a tool named "
                        f"{t.name!r}, differently; rename one or disable one of the toolsets"
                    )
        return tuple(found[n][0] for n in sorted(found))

    def _unknown(self, names: list[str]) -> str:
        known = ", ".join(self.names) or "(none registered)"
        return f"unknown toolset {', '.join(map(repr, names))}; known toolsets: {known}"


def _names(value: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ToolError(f"{what} takes a collection of toolset names, not the string {value!r}")
    return tuple(value)
