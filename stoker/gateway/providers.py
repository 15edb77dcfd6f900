"""Where the gateway gets providers, and how it times them.

The seam is one callable from a `ProviderRoute` to a `Provider`, so tests hand in a
shared simulator and a deployment uses `stoker.providers.select` with the retry policy
and timeouts of the gateway's config (`factory_for`). With a simulator cache file (the
Stoker home's `sim-cache.db`), all the gateway's sim sessions share one simulator whose
cache outlives the process, as one provider account's would. Every provider the gateway
uses is wrapped in `TimedProvider`, so the time spent in provider calls can be told
apart from the gateway's own (`stoker.gateway.timing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from stoker.config import Config
from stoker.gateway.timing import provider_call
from stoker.providers.base import CallContext, Completion, Provider, ProviderWrapper
from stoker.providers.retry import RetryPolicy
from stoker.providers.select import select_provider
from stoker.providers.sim.cache_file import SimCacheFile
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.request import Request


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRoute:
    """Which provider a session's calls go to. The key is never shown (repr=False)."""

    provider: str
    model: str
    base_url: str | None = None
    api_mode: str | None = None
    api_key: str | None = field(default=None, repr=False)


ProviderFactory = Callable[[ProviderRoute], Provider]

_SIM_APIS = {"chat": "openai_chat", "responses": "openai_responses"}


@dataclass(frozen=True, slots=True)
class KeptSim:
    """The one simulator engine a gateway's sim sessions share, and the file its cache
    entries are kept in between processes (`stoker.providers.sim.cache_file`)."""

    engine: SimEngine
    cache_file: SimCacheFile


def default_provider_factory(
    route: ProviderRoute, *, retry: RetryPolicy | None = None, sim: KeptSim | None = None
) -> Provider:
    """The simulator for "sim" (without keeping payloads: a server runs for days; on
    `sim`'s engine and file when given), else `select_provider` with the route's key and
    base URL as its settings and `retry` (default: `RetryPolicy()`, with the default
    `Timeouts`)."""
    if route.provider == "sim":
        api = _SIM_APIS.get(route.api_mode or "", route.api_mode or "openai_responses")
        if sim is None:
            return SimProvider(keep_requests=False, openai_api=api)
        return SimProvider(
            keep_requests=False, openai_api=api, engine=sim.engine, cache_file=sim.cache_file
        )
    # Only the credentials are used; the route, not the environment, supplies them.
    config = Config.from_env(
        {},
        anthropic_api_key=route.api_key,
        anthropic_base_url=route.base_url,
        openai_api_key=route.api_key,
        openai_base_url=route.base_url,
        openrouter_api_key=route.api_key,
        openrouter_base_url=route.base_url,
        deepseek_api_key=route.api_key,
        deepseek_base_url=route.base_url,
        bedrock_base_url=route.base_url,
        google_api_key=route.api_key,
        google_base_url=route.base_url,
    )
    kind = route.provider
    if kind == "openai" and route.api_mode == "chat":
        kind = "openai-chat"
    spec = (
        f"openai-compatible:{route.base_url or ''}#{route.model}"
        if kind.startswith("openai-compatible")  # +vllm / +llamacpp name the server
        else f"{kind}:{route.model}"
    )
    return select_provider(spec, config=config, retry=retry).provider


def factory_for(retry: RetryPolicy, *, sim_cache: Path | None = None) -> ProviderFactory:
    """`default_provider_factory` with `retry`: how the gateway's `[timeouts]` reach the
    SDKs; with `sim_cache`, every sim session on one simulator that keeps its cache there."""
    sim = KeptSim(SimEngine(), SimCacheFile(sim_cache)) if sim_cache is not None else None
    return partial(default_provider_factory, retry=retry, sim=sim)


class TimedProvider(ProviderWrapper):
    """A provider whose calls are timed into the current request's tally."""

    async def complete(self, request: Request, context: CallContext) -> Completion:
        return await provider_call(self.inner.complete(request, context))
