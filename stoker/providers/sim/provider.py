"""The embedded default provider: renders like a real one, answers from `SimEngine`.

Every request goes through the wire dialect and back, so the in-process simulator tests
the same bytes a real provider would receive. It keeps the payloads it received
(`requests`) so tests can compare what was actually sent. With a `cache_file` (a
simulator on the wall clock with a Stoker home: `stoker.providers.select`), its cache
entries outlive the process, as a real provider's do (`stoker.providers.sim.cache_file`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from stoker.cache.accounting import CacheOutcome
from stoker.cache.models import ModelInfo, model_info, with_prices
from stoker.cache.prices import PriceBook
from stoker.clock import Clock, SystemClock
from stoker.lifecycle import AsyncClosing
from stoker.providers.base import CallContext, Completion
from stoker.providers.caches import CacheCall, owned
from stoker.providers.sim.cache_file import SimCacheFile
from stoker.providers.sim.engine import SimEngine, SimResult
from stoker.providers.sim.families import dialect_of
from stoker.wire.blocks import TextBlock, ThinkingBlock
from stoker.wire.dialects import dialect_module, gemini_caches
from stoker.wire.dialects._memo import detached
from stoker.wire.dialects.sse import pieces
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request

COLD = (
    "the simulator holds no entry for this prefix in this workspace: it was never written "
    "here (a new simulator process, another API key, another model) or was forgotten"
)


def streamed(message: AssistantMessage, context: CallContext) -> None:
    """Hand the answer's thinking and text to the context's hooks in the pieces a streamed
    answer arrives in, as a provider's stream would."""
    for block in message.content:
        if isinstance(block, ThinkingBlock) and block.thinking and context.on_thinking:
            for piece in pieces(block.thinking):
                context.on_thinking(piece)
        elif isinstance(block, TextBlock) and block.text and context.on_text:
            for piece in pieces(block.text):
                context.on_text(piece)


def facts_of(outcome: CacheOutcome) -> tuple[tuple[str, str], ...]:
    """The accountant's miss facts as (kind, sentence) pairs for the explainer; a call
    that read nothing, for no reason the accountant found, was a cold cache."""
    facts: tuple[tuple[str, str], ...] = tuple((f.cause, f.describe()) for f in outcome.misses)
    if not facts and outcome.usage.read == 0 and outcome.breakpoints:
        facts = (("cold", COLD),)
    return facts


@dataclass(slots=True, kw_only=True)
class SimProvider(AsyncClosing):
    """A deterministic provider with exact cache accounting. No key, no network."""

    engine: SimEngine = field(default_factory=SimEngine)
    clock: Clock = field(default_factory=SystemClock)
    workspace: str = "default"
    openai_api: str = "openai_responses"
    latency: float = 0.0
    keep_requests: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[CacheOutcome] = field(default_factory=list)
    prices: PriceBook | None = None  # the user's overrides over the catalogue
    made: set[str] = field(default_factory=set)  # explicit caches this provider created
    # Which server a self-hosted model runs on ("vllm" or "llamacpp"), and a dialect that
    # wins over the model's family (an OpenAI model through OpenRouter: "openrouter_chat").
    local: str = "vllm"
    dialect: str | None = None
    # Where the engine's cache entries are kept between processes (None: memory only).
    cache_file: SimCacheFile | None = None

    @property
    def name(self) -> str:
        return "sim"

    @property
    def cache_account(self) -> str:
        """Where its explicit caches live: this engine's workspace (providers that share an
        engine, as replicas share a provider, see each other's caches)."""
        return f"sim-{self.engine.account}-{self.workspace}"

    def model_info(self, model: str) -> ModelInfo:
        """The simulator serves only models it has facts for; others fail clearly (a
        self-hosted server serves any model: it gets the local family's facts)."""
        if self.dialect in ("vllm_chat", "llamacpp_chat"):
            return with_prices(
                self.engine.families.info(self.dialect, {"model": model}), self.prices, model
            )
        return with_prices(model_info(model), self.prices, model)

    async def aclose(self) -> None:
        """Close the cache file, if any (its entries are saved at every call); here so
        every provider closes the same way."""
        if self.cache_file is not None:
            self.cache_file.close()

    def dialect_for(self, model: str) -> str:
        if self.dialect is not None:
            return self.dialect
        info = model_info(model)
        family = info.provider
        if family == "google":
            return "gemini"
        if family == "anthropic":
            return "anthropic"
        return dialect_of(info, self.local) or self.openai_api

    async def complete(self, request: Request, context: CallContext) -> Completion:
        dialect = self.dialect_for(request.prefix.params.model)
        module = dialect_module(dialect)
        # Shared, so the accountant finds old blocks by identity; trusted, because the
        # shared payload reaches no one else (`requests` keeps a copy a test may change).
        payload = module.render_request(request, shared=True)
        started = self.clock.now()

        def handle() -> SimResult:
            return self.engine.handle(
                dialect, payload, at=started, workspace=self.workspace, trusted=True
            )

        kept = self.cache_file
        result = (
            handle()
            if kept is None
            else kept.call(self.engine, dialect, self.workspace, at=started, run=handle)
        )
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.keep_requests:
            self.requests.append(detached(payload))
            self.outcomes.append(result.outcome)
        message, usage = module.parse_response(result.body)
        streamed(message, context)
        return Completion(
            message=message, usage=usage, started_at=started, facts=facts_of(result.outcome)
        )

    # -- explicit cache objects (Gemini's cachedContents; `stoker.providers.caches`) ------

    async def create_cache(self, request: Request, *, ttl: float, label: str) -> CacheCall:
        payload = gemini_caches.render_create(request, ttl=ttl, display_name=label)
        started = self.clock.now()
        made = self.engine.google.create_cache(payload, at=started, workspace=self.workspace)
        info = gemini_caches.parse_cache(gemini_caches.render_cache(made))
        self.made.add(info.name)
        return CacheCall(
            name=info.name, tokens=info.tokens, expires_at=info.expires_at, started_at=started
        )

    async def extend_cache(self, name: str, *, ttl: float) -> CacheCall:
        started = self.clock.now()
        body = gemini_caches.render_update(ttl)
        made = self.engine.google.update_cache(name, body, at=started, workspace=self.workspace)
        info = gemini_caches.parse_cache(gemini_caches.render_cache(made, updated_at=started))
        return CacheCall(
            name=info.name, tokens=info.tokens, expires_at=info.expires_at, started_at=started
        )

    async def delete_cache(self, name: str) -> CacheCall:
        started = self.clock.now()
        google = self.engine.google
        info = google.get_cache(name, at=started, workspace=self.workspace)
        google.delete_cache(name, at=started, workspace=self.workspace)
        return CacheCall(
            name=name, tokens=info.tokens, expires_at=info.expires_at, started_at=started
        )

    async def sweep_caches(self, scope: str, *, keep: Collection[str] = ()) -> list[str]:
        now = self.clock.now()
        google = self.engine.google
        gone = [
            c.name
            for c in google.list_caches(at=now, workspace=self.workspace)
            if owned(c.display_name, scope) and c.name not in keep and c.name not in self.made
        ]
        for name in gone:
            google.delete_cache(name, at=now, workspace=self.workspace)
        return gone
