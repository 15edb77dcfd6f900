"""The provider seam: one async call from a `Request` to a `Completion`.

Every provider, simulated or real, renders through `stoker.wire.dialects` and reports
usage in Stoker's disjoint buckets, so the agent loop never knows which one it talks to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from stoker.cache.models import ModelInfo
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """Per-call context: which session is calling, and where streamed text and thinking
    go (either asks the provider to stream)."""

    session_id: str
    on_text: Callable[[str], object] | None = None
    on_thinking: Callable[[str], object] | None = None

    @property
    def streams(self) -> bool:
        return self.on_text is not None or self.on_thinking is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A provider's answer. `facts` are (cause, detail) cache facts a provider can state
    about this call (the simulator knows exactly why it missed; real providers do not).
    `cost_usd` is what the provider itself says the call cost (OpenRouter's `usage.cost`),
    which the record takes over Stoker's own price arithmetic."""

    message: AssistantMessage
    usage: Usage
    started_at: float
    retries: int = 0
    facts: tuple[tuple[str, str], ...] = ()
    cost_usd: float | None = None


class Provider(Protocol):
    """Anything that can answer a request."""

    @property
    def name(self) -> str: ...

    def model_info(self, model: str) -> ModelInfo:
        """Cache facts for `model` on this provider (minimums, regime, prices)."""
        ...

    async def complete(self, request: Request, context: CallContext) -> Completion: ...


class ProviderWrapper:
    """A provider around another: its name, model facts and closing come from `inner`;
    a subclass changes `complete` (to time calls, audit them, inject faults)."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    def model_info(self, model: str) -> ModelInfo:
        return self.inner.model_info(model)

    async def complete(self, request: Request, context: CallContext) -> Completion:
        return await self.inner.complete(request, context)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
