"""The agent is configuration: a provider, a model, tools, a system prompt, limits.

It holds no conversation state. `agent.session()` freezes a `Prefix` from this
configuration once; every turn, fork and resume of that session sends it verbatim.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stoker.agent.review import ReviewConfig
from stoker.agent.session import Session
from stoker.agent.system_prompt import DEFAULT_SYSTEM, build_system_prompt
from stoker.agent.toolkits import Integrations, use_toolkit_tool
from stoker.cache.models import ModelInfo
from stoker.cache.planner import CachePolicy
from stoker.clock import Clock, SystemClock
from stoker.errors import ToolError
from stoker.providers.base import Provider
from stoker.tools import Tool, ToolRegistry
from stoker.wire.events import EventSink
from stoker.wire.prefix import CacheParams, Prefix


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """What an agent is, not what it has said. Immutable: derive variants with `replace`."""

    provider: Provider = field(compare=False)
    model: str
    tools: Sequence[Tool] = ()
    registry: ToolRegistry | None = field(default=None, compare=False)
    toolsets: tuple[str, ...] | None = None  # enabled toolsets of the registry; None = all
    disabled_toolsets: tuple[str, ...] = ()
    system: str = DEFAULT_SYSTEM
    system_sections: tuple[str, ...] = ()
    thinking_budget: int | None = None
    effort: str | None = None
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    max_iterations: int = 25
    max_tokens: int = 4096
    cache_policy: CachePolicy = field(default_factory=CachePolicy)
    review: ReviewConfig | None = None
    integrations: Integrations | None = field(default=None, compare=False)
    clock: Clock = field(default_factory=SystemClock, compare=False)
    kind: str = "agent"
    platform: str = "library"  # where the agent runs ("cli", "gateway", ...), for provenance

    @property
    def info(self) -> ModelInfo:
        return self.provider.model_info(self.model)

    def resolved_tools(self) -> tuple[Tool, ...]:
        """Registry toolsets plus loose tools, sorted by wire name; a name used twice fails."""
        found: dict[str, Tool] = {}
        registry_tools = (
            self.registry.resolve(self.toolsets, self.disabled_toolsets) if self.registry else ()
        )
        toolkit_tools = (use_toolkit_tool(self.integrations),) if self.integrations else ()
        for t in (*registry_tools, *self.tools, *toolkit_tools):
            if t.name in found and found[t.name] != t:
                raise ToolError(f"two different tools are named {t.name!r}; rename one of them")
            found[t.name] = t
        return tuple(found[name] for name in sorted(found))

    def build_prefix(self) -> Prefix:
        """The frozen prefix a new session will send for its whole life."""
        return Prefix(
            params=CacheParams(
                model=self.model,
                thinking_budget=self.thinking_budget,
                effort=self.effort,
                tool_choice=self.tool_choice,
                parallel_tool_calls=self.parallel_tool_calls,
            ),
            tools=tuple(t.spec_bytes for t in self.resolved_tools()),
            system=build_system_prompt(
                self.system, clock=self.clock, sections=self.system_sections
            ),
        )

    def config_snapshot(self) -> dict[str, Any]:
        """What shapes the prefix, as stored with a session and compared on resume.

        Inputs, not outputs: the system prompt's base text and sections are hashed (the
        built prompt carries the creation date, which a resume days later must not
        compare). Credentials and callbacks are never part of it.
        """
        return {
            "agent_kind": self.kind,
            "provider": self.provider.name,
            "model": self.model,
            "system_sha": _sha(self.system),
            "sections_sha": _sha("\x00".join(self.system_sections)),
            "thinking_budget": self.thinking_budget,
            "effort": self.effort,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "toolsets": list(self.toolsets) if self.toolsets is not None else None,
            "disabled_toolsets": list(self.disabled_toolsets),
        }

    def session(self, *, session_id: str | None = None, sink: EventSink | None = None) -> Session:
        """A new conversation with a prefix frozen now."""
        self.info  # noqa: B018 - fail here, not at the first call, on an unknown model
        return Session.create(self, session_id=session_id, sink=sink)
