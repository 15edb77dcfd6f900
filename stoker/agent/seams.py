"""What a session is given: its agent, seen through a Protocol, and the hooks of one send.

`Agent` implements `SessionAgent`; the session knows the agent only through it, so
`agent.py` may build sessions without an import cycle. `Callbacks` last one `send`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from stoker.agent.compaction import CompactionPolicy
from stoker.agent.fallback import Route
from stoker.agent.integrations import Integrations
from stoker.agent.review import ReviewConfig
from stoker.agent.telemetry import Telemetry
from stoker.cache.fleet import FleetWatch
from stoker.cache.keys import KeyShards
from stoker.cache.planner import CachePolicy
from stoker.clock import Clock
from stoker.providers.base import Provider
from stoker.tools import Approver, Tool, ToolProgress
from stoker.wire.record import CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Callbacks:
    """Hooks for one `send`: they end with it, so a finished run's consumer is let go.

    `approver` is asked before each risky tool call the run's policy allows (see
    `stoker.tools.approval`); None runs them unasked. Sub-agents started in the turn ask
    it too; background reviews never do (their policy denies risky tools).
    """

    on_text: Callable[[str], object] | None = None
    on_thinking: Callable[[str], object] | None = None  # thinking or reasoning summaries
    on_tool: Callable[[ToolProgress], object] | None = None
    on_status: Callable[[str], object] | None = None
    on_record: Callable[[CacheRecord], object] | None = None  # after each provider call
    on_review: Callable[[str], object] | None = None  # one summary line per review
    on_review_error: Callable[[BaseException], object] | None = None
    approver: Approver | None = None


class SessionAgent(Protocol):
    """What a session needs of its agent. `Agent` implements it; the session knows the
    agent only through this, so `agent.py` may build sessions without an import cycle."""

    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> Provider: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def cache_policy(self) -> CachePolicy: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def review(self) -> ReviewConfig | None: ...
    @property
    def integrations(self) -> Integrations | None: ...
    @property
    def platform(self) -> str: ...
    @property
    def key_shards(self) -> KeyShards: ...
    @property
    def fleet(self) -> FleetWatch: ...
    @property
    def compaction(self) -> CompactionPolicy: ...
    @property
    def routes(self) -> tuple[Route, ...]: ...
    @property
    def fallback_cooldown(self) -> float: ...
    @property
    def telemetry(self) -> Telemetry: ...
    @property
    def output(self) -> Any: ...
    @property
    def output_retries(self) -> int: ...
    def resolved_tools(self) -> tuple[Tool, ...]: ...
    def available_tools(self) -> tuple[Tool, ...]: ...
    def config_snapshot(self) -> dict[str, Any]: ...
