"""Reconciling a stored session with the agent that resumes it.

The stored prefix is what gets sent; the runtime agent only has to be able to continue
it. Tools: when the runtime tool fingerprint equals the stored one nothing else is
looked at; otherwise every tool used in history (an index the store keeps) must be
implemented, added or unused-and-removed tools change nothing that is sent, and
`tools="reconcile"` turns the runtime list into a declared rebase. Everything else that
shapes the prefix is compared strictly and every difference is reported at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from stoker.errors import MissingTools, ResumeMismatch
from stoker.tools import Tool
from stoker.wire.prefix import Prefix
from stoker.wire.stored import StoredSession

if TYPE_CHECKING:
    from stoker.agent.agent import Agent

ToolsMode = Literal["keep", "reconcile"]

# Snapshot fields compared strictly (params are compared on the stored prefix itself,
# which reflects every declared rebase).
_COMPARED_CONFIG = ("agent_kind", "system_sha", "sections_sha", "toolsets", "disabled_toolsets")
_COMPARED_PARAMS = ("model", "thinking_budget", "effort", "tool_choice", "parallel_tool_calls")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciled:
    prefix: Prefix
    implementations: dict[str, Tool]
    rebase_reason: str | None = None


def _same_tool_bytes(prefix: Prefix, tools: tuple[Tool, ...]) -> bool:
    return tuple(t.spec_bytes for t in tools) == prefix.tools


def reconcile(stored: StoredSession, agent: Agent, *, tools: ToolsMode = "keep") -> Reconciled:
    """What a resumed session sends and may run, or an error listing every mismatch."""
    runtime = agent.config_snapshot()
    diffs: list[tuple[str, object, object]] = [
        (name, stored.config.get(name), runtime[name])
        for name in _COMPARED_CONFIG
        if stored.config.get(name) != runtime[name]
    ]
    stored_params = stored.prefix.params.to_dict()
    diffs += [
        (name, stored_params[name], runtime[name])
        for name in _COMPARED_PARAMS
        if stored_params[name] != runtime[name]
    ]
    if diffs:
        raise ResumeMismatch(stored.id, diffs)

    runtime_tools = agent.resolved_tools()
    by_name = {t.name: t for t in runtime_tools}
    if _same_tool_bytes(stored.prefix, runtime_tools):  # fast path: nothing else to look at
        return Reconciled(prefix=stored.prefix, implementations=by_name)

    missing = sorted(stored.used_tools - by_name.keys())
    if missing:
        raise MissingTools(stored.id, missing)
    if tools == "keep":
        advertised = set(stored.prefix.tool_names)
        return Reconciled(
            prefix=stored.prefix,
            implementations={n: t for n, t in by_name.items() if n in advertised},
        )
    added = sorted(by_name.keys() - set(stored.prefix.tool_names))
    removed = sorted(set(stored.prefix.tool_names) - by_name.keys())
    new_prefix = Prefix(
        params=stored.prefix.params,
        tools=tuple(t.spec_bytes for t in runtime_tools),
        system=stored.prefix.system,
    )
    reason = f"tools reconciled on resume: added {added}, removed {removed}"
    return Reconciled(prefix=new_prefix, implementations=by_name, rebase_reason=reason)
