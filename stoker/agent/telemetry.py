"""What a session tells an observability stack: one seam, and by default nothing.

A session opens a turn span around each user turn and a call span around each provider
call, and hands the call span its `CacheRecord` once the call is measured, so the span
says exactly what the record says. `NO_TELEMETRY` does nothing and imports nothing;
`stoker.agent.otel` turns the same calls into OpenTelemetry spans and metrics. Only
`stoker.agent.telemetry_setup.telemetry_from` (or a program that builds `OtelTelemetry`
itself) imports OpenTelemetry, so Stoker runs without the `otel` extra installed. This
module imports neither: the seam sits below both of its implementations.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from stoker.agent.loop import TurnResult
from stoker.wire.record import CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFacts:
    """What is known of a turn when it starts."""

    agent: str  # the agent's name ("agent", "gateway", ...)
    session_id: str
    parent_id: str | None  # the session a fork, review or sub-agent was made from
    role: str
    provider: str
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFacts:
    """What is known of a provider call before it is sent."""

    session_id: str
    role: str
    provider: str
    model: str
    purpose: str  # "turn", or a keep-warm request: "ping" / "seal"
    max_tokens: int


class TurnSpan(Protocol):
    def ended(self, result: TurnResult[Any]) -> None:
        """The turn finished with `result` (a raise ends the span as failed instead)."""


class CallSpan(Protocol):
    def recorded(self, record: CacheRecord) -> None:
        """The call's measured record: usage, cost and the cache explanation."""

    def failed(self, error: BaseException) -> None:
        """The call failed and the caller handled it (a raise is seen by the span itself)."""


class Telemetry(Protocol):
    """Spans (and metrics) for turns and provider calls. Implementations: `NoTelemetry`,
    `stoker.agent.otel.OtelTelemetry`."""

    def turn(self, facts: TurnFacts) -> AbstractContextManager[TurnSpan]: ...

    def call(self, facts: CallFacts) -> AbstractContextManager[CallSpan]: ...

    def attached(self, headers: Mapping[str, str]) -> AbstractContextManager[None]:
        """Make the trace context carried by `headers` (W3C `traceparent`) the parent of
        the spans opened inside, e.g. for the turns of one gateway request."""
        ...

    def shutdown(self) -> None:
        """Export what is buffered and stop."""


class _Nothing:
    def ended(self, result: TurnResult[Any]) -> None:
        pass

    def recorded(self, record: CacheRecord) -> None:
        pass

    def failed(self, error: BaseException) -> None:
        pass


class NoTelemetry:
    """The default: no spans, no metrics, no imports."""

    @contextmanager
    def turn(self, facts: TurnFacts) -> Iterator[TurnSpan]:
        yield _Nothing()

    @contextmanager
    def call(self, facts: CallFacts) -> Iterator[CallSpan]:
        yield _Nothing()

    @contextmanager
    def attached(self, headers: Mapping[str, str]) -> Iterator[None]:
        yield

    def shutdown(self) -> None:
        pass


NO_TELEMETRY = NoTelemetry()
