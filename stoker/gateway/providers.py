"""Where the gateway gets providers, and how it times them.

The seam is one callable from a `ProviderRoute` to a `Provider`, so tests hand in a
shared simulator and a deployment uses `stoker.providers.select` with the retry policy
and timeouts of the gateway's config (`factory_for`). Every provider the gateway
uses is wrapped in `TimedProvider`, so the time spent in provider calls can be told
apart from the gateway's own (`stoker.gateway.timing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from stoker.config import Config
from stoker.gateway.timing import provider_call
from stoker.providers.base import CallContext, Completion, Provider, ProviderWrapper
from stoker.providers.retry import RetryPolicy
from stoker.providers.select import select_provider
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


def default_provider_factory(route: ProviderRoute, *, retry: RetryPolicy | None = None) -> Provider:
    """The simulator for "sim" (without keeping payloads: a server runs for days), else
    `select_provider` with the route's key and base URL as its settings and `retry`
    (default: `RetryPolicy()`, with the default `Timeouts`)."""
    if route.provider == "sim":
        api = _SIM_APIS.get(route.api_mode or "", route.api_mode or "openai_responses")
        return SimProvider(keep_requests=False, openai_api=api)
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


def factory_for(retry: RetryPolicy) -> ProviderFactory:
    """`default_provider_factory` with `retry`: how the gateway's `[timeouts]` reach the SDKs."""
    return partial(default_provider_factory, retry=retry)


class TimedProvider(ProviderWrapper):
    """A provider whose calls are timed into the current request's tally."""

    async def complete(self, request: Request, context: CallContext) -> Completion:
        return await provider_call(self.inner.complete(request, context))
