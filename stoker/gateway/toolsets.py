"""Outage or removal: how a gateway tells a toolset that is down from one taken away.

The rule. The gateway's configuration (`[agent] toolsets` / `disabled_toolsets`, kept
per session in its `SessionSettings`) says which toolsets a session has; the tool
registry says which of them can run now.

- A toolset the configuration still selects but the registry lacks (unregistered
  because its server is down, or this replica started without it) is an **outage**.
  The session keeps sending its stored `tools[]`, byte for byte; a call to one of its
  tools comes back to the model as "`X` is unavailable right now", and works again once
  the toolset is registered. Nothing is declared and nothing is rewritten: the outage
  costs the calls that fail, not the cache.
- A configuration change that stops selecting a registered toolset is a **removal**: a
  deliberate change, applied as one declared break. When history used a tool it drops,
  the message that finds the change is answered with a 409 (`ToolsRemoved`) telling the
  user what to do (`/new`, or have the toolset restored) and nothing is sent. The session
  records that it was told, so the 409 comes once per change: the next message applies
  the change, keeping each used tool in `tools[]` as unavailable (history calls it, so
  it stays advertised, as on every resume). A session is never left failing every
  message.

Judged against the registry of the process that applies the change: a toolset that is
down at that moment cannot be told from one taken away, so its tools stay in `tools[]`
as unavailable and no 409 is sent.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from stoker.agent.seams import SessionAgent
from stoker.gateway.session_settings import SessionSettings
from stoker.tools import Tool, unavailable_tool
from stoker.wire.prefix import Prefix

NOTICE_KEY = "tools_removed_notice"  # the session config entry: the removal it was told of


def dropped_tools(used: Collection[str], *, before: SessionAgent, after: SessionAgent) -> list[str]:
    """Used tools that `before` can run and `after` does not select: a removal. A used
    tool neither can run is down, which is no change at all."""
    had = {t.name for t in before.available_tools()}
    has = {t.name for t in after.available_tools()}
    return sorted(set(used) & (had - has))


def removal_notice(dropped: list[str], wanted: SessionSettings) -> dict[str, Any]:
    """What a session stores once it was told of a removal: the tools and the selection
    that dropped them, so another change is another notice."""
    return {
        "tools": dropped,
        "toolsets": list(wanted.toolsets) if wanted.toolsets is not None else None,
        "disabled_toolsets": list(wanted.disabled_toolsets),
    }


def tools_after_change(
    prefix: Prefix, *, before: SessionAgent, after: SessionAgent, used: Collection[str]
) -> tuple[Tool, ...]:
    """The tools a session sends after its toolsets changed on purpose: what `after`
    selects, plus, as unavailable stand-ins with their stored bytes, every advertised tool
    it would drop that history used, and every one that is down now (an outage during a
    change is still an outage)."""
    now = {t.name: t for t in after.available_tools()}
    had = {t.name for t in before.available_tools()}
    kept = [
        unavailable_tool(spec)
        for name, spec in zip(prefix.tool_names, prefix.tools, strict=True)
        if name not in now and (name in used or name not in had)
    ]
    return (*now.values(), *kept)
