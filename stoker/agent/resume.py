"""Reconciling a stored session with the agent that resumes it.

The stored prefix is what gets sent; the runtime agent only has to be able to continue
it. Tools: when the runtime tool fingerprint equals the stored one nothing else is
looked at; otherwise every tool used in history (an index the store keeps) must be
implemented, added or unused-and-removed tools change nothing that is sent, and
`tools="reconcile"` turns the runtime list into a declared rebase. Everything else that
shapes the prefix is compared strictly and every difference is reported at once.

Outage or removal: the toolset selection (`toolsets`, `disabled_toolsets`) is compared
strictly, so a resume that passes has the configuration the session was stored with.
A stored tool the runtime lacks then either came from a registry toolset that is not
registered now (its server is down, this process started without it): an outage, and
the tool stays in `tools[]` as unavailable; or it is one the agent defined itself
(`own_tools` in the stored config) and the code no longer has: a removal, refused when
history used it. Changing the selection is the deliberate way to drop a toolset, and it
goes through `Session.rebase`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stoker.errors import MissingTools, ResumeMismatch
from stoker.tools import Tool, unavailable_tool
from stoker.wire.stored import StoredSession

ToolsMode = Literal["keep", "reconcile"]

# Snapshot fields compared strictly (params are compared on the stored prefix itself,
# which reflects every declared rebase).
_COMPARED_CONFIG = ("agent_name", "system_sha", "sections_sha", "toolsets", "disabled_toolsets")
_COMPARED_PARAMS = (
    "model",
    "thinking_budget",
    "effort",
    "tool_choice",
    "parallel_tool_calls",
    "output",
)
_RENAMED = {"agent_name": "agent_kind"}  # config keys written under an older name


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciled:
    """What a resumed session may run, and the declared break that reconciling takes."""

    implementations: dict[str, Tool]
    declared_break: str | None = None


def _stored(config: Mapping[str, Any], name: str) -> object:
    if name in config:
        return config[name]
    old = _RENAMED.get(name)
    return config.get(old) if old is not None else None


def reconcile(
    stored: StoredSession,
    *,
    config: Mapping[str, Any],
    tools: Sequence[Tool],
    mode: ToolsMode = "keep",
) -> Reconciled:
    """What a resumed session may run, or an error listing every mismatch.

    `config` is the runtime agent's config snapshot and `tools` its resolved tools.
    """
    diffs: list[tuple[str, object, object]] = [
        (name, _stored(stored.config, name), config[name])
        for name in _COMPARED_CONFIG
        if _stored(stored.config, name) != config[name]
    ]
    stored_params = stored.prefix.params.to_dict()
    diffs += [
        (name, stored_params.get(name), config.get(name))
        for name in _COMPARED_PARAMS
        if stored_params.get(name) != config.get(name)
    ]
    if diffs:
        raise ResumeMismatch(stored.id, diffs)

    by_name = {t.name: t for t in tools}
    if tuple(t.spec_bytes for t in tools) == stored.prefix.tools:  # fast path
        return Reconciled(implementations=by_name)

    # Sessions stored before `own_tools` was recorded count every tool as a registry's.
    own = set(stored.config.get("own_tools") or ())
    removed = sorted((stored.used_tools - by_name.keys()) & own)
    if removed:
        raise MissingTools(stored.id, removed)
    if mode == "keep":
        advertised = set(stored.prefix.tool_names)
        return Reconciled(implementations={n: t for n, t in by_name.items() if n in advertised})
    down = {
        name: unavailable_tool(spec)
        for name, spec in zip(stored.prefix.tool_names, stored.prefix.tools, strict=True)
        if name not in by_name and name not in own
    }
    added = sorted(by_name.keys() - set(stored.prefix.tool_names))
    dropped = sorted(set(stored.prefix.tool_names) - by_name.keys() - down.keys())
    reason = f"tools reconciled on resume: added {added}, removed {dropped}"
    return Reconciled(implementations={**by_name, **down}, declared_break=reason)
