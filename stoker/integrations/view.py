"""What a session knows about its toolkits, and how a change is told to the model.

A toolkit's gated actions (`ToolSpec.gate`) are told with its tools, as a catalogue:
what it can do once the user approves or connects an account, so the model can offer it.

A session keeps the `fingerprint` of its view. At a turn boundary a new view with
another fingerprint means a toolkit connected, disconnected or changed; the session
says so in a note in the new user message (`describe_change`) instead of changing
`tools[]`, so the cached prefix survives (docs/cache-breakers.md, "Per-turn tool lists").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from stoker.integrations.toolkit import ToolSpec, sorted_specs, specs_bytes
from stoker.wire.canonical import canonical_json

LISTED_NAMES = 10
"""How many tool names a note lists before it says "and N more"."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolkitView:
    """The tools of each available toolkit, as of one moment; `ToolkitView()` is empty.

    `toolkits` maps toolkit name to its tools, both sorted by name. `missing` names the
    registered toolkits that have no tools here: not yet fetched (a cold cache at
    prewarm) or not reachable. `authoritative` says nothing is missing, so the session
    needs no fetch. `fingerprint` is the sha256 of the view's canonical bytes and
    covers only what the model is told (`missing` and `generation` are not in it).
    `generation` is the registry generation the view was built from.
    """

    toolkits: Mapping[str, tuple[ToolSpec, ...]] = field(default_factory=dict, hash=False)
    missing: tuple[str, ...] = ()
    generation: int = 0
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        toolkits = {n: sorted_specs(n, self.toolkits[n]) for n in sorted(self.toolkits)}
        object.__setattr__(self, "toolkits", MappingProxyType(toolkits))
        object.__setattr__(self, "missing", tuple(sorted(set(self.missing))))
        object.__setattr__(self, "fingerprint", hashlib.sha256(self.view_bytes()).hexdigest())

    @property
    def authoritative(self) -> bool:
        return not self.missing

    @property
    def names(self) -> tuple[str, ...]:
        """The toolkits that have tools in this view, sorted."""
        return tuple(self.toolkits)

    def view_bytes(self) -> bytes:
        """Canonical JSON `{toolkit: [spec, ...], ...}`: the bytes the fingerprint hashes."""
        items = (canonical_json(n) + b":" + specs_bytes(s) for n, s in self.toolkits.items())
        return b"{" + b",".join(items) + b"}"


def describe_change(old: ToolkitView, new: ToolkitView) -> str:
    """A short, deterministic note for the model about what changed between two views,
    or "" when the model would be told the same thing.

    >>> describe_change(ToolkitView(), ToolkitView(toolkits={"x": [ToolSpec(name="a")]}))
    "Toolkit 'x' connected: 1 tool (a)."
    """
    parts: list[str] = []
    for name in sorted({*old.toolkits, *new.toolkits}):
        before, after = old.toolkits.get(name), new.toolkits.get(name)
        if before is None and after is not None:
            free = (s.name for s in after if s.gate is None)
            parts.append(f"Toolkit {name!r} connected: {_tools(free)}{catalogue(after)}.")
        elif after is None:
            state = "is unavailable for now" if name in new.missing else "disconnected"
            parts.append(f"Toolkit {name!r} {state}.")
        elif before is not None and specs_bytes(before) != specs_bytes(after):
            parts.append(f"Toolkit {name!r} changed: {_delta(before, after)}.")
    return " ".join(parts)


_GATED = {
    "approval": "behind the user's approval",
    "connection": "waiting for the user to connect an account",
}


def catalogue(specs: Iterable[ToolSpec]) -> str:
    """The gated actions of a toolkit as a note tells them ("" when it has none): name and
    one line each, grouped by what they wait for, in name order."""
    given = tuple(specs)
    parts = []
    for gate, label in _GATED.items():
        entries = [f"{s.name} ({s.line})" if s.line else s.name for s in given if s.gate == gate]
        if entries:
            parts.append(f"{label}: {_names(entries)}")
    return "; " + "; ".join(parts) if parts else ""


def _tools(names: Iterable[str]) -> str:
    listed = list(names)
    count = f"{len(listed)} tool{'' if len(listed) == 1 else 's'}"
    return f"{count} ({_names(listed)})" if listed else count


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED_NAMES])
    rest = len(names) - LISTED_NAMES
    return f"{shown} and {rest} more" if rest > 0 else shown


def _delta(before: tuple[ToolSpec, ...], after: tuple[ToolSpec, ...]) -> str:
    old = {s.name: s.spec_bytes for s in before}
    new = {s.name: s.spec_bytes for s in after}
    changes = [
        ("added", sorted(new.keys() - old.keys())),
        ("removed", sorted(old.keys() - new.keys())),
        ("updated", sorted(n for n in old.keys() & new.keys() if old[n] != new[n])),
    ]
    return "; ".join(f"{verb} {_names(names)}" for verb, names in changes if names)
