"""OpenRouter's prompt caches: its routing to upstream providers, and each upstream's own
cache computed by that upstream's rules.

OpenRouter serves a model from several providers (Claude from Anthropic, Amazon Bedrock
and Google; the model table's `endpoints`), and each holds its own cache. Routing, as
documented (docs/provider-caching.md, "OpenRouter sticky routing"):

* `provider.order` names the upstream: its first entry that serves the model, no stickiness.
* Otherwise a conversation sticks to the upstream that served it: keyed per account, model
  and conversation, where the conversation is the request's `session_id` (body, else the
  `x-session-id` header, else `prompt_cache_key`) or, without one, a hash of its first
  system message and first other message. A request with a key sticks from its first
  success; without one, from its first cache read. A sticky session ends after 10 minutes
  without a request.
* A request with no sticky upstream is load-balanced [inferred: in turn over the
  endpoints, per account and model], so a conversation's next request may land on a
  provider whose cache does not hold it: that miss is reported as `rerouted`.

Each upstream bills as the provider it is: Claude by Anthropic's algorithm on the
Messages body it receives (`anthropic_equivalent`), an OpenAI model by OpenAI's on the
Chat body (`openai_equivalent`), others (Gemini, DeepSeek) by their implicit caches.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.accounting.anthropic import AnthropicAccountant
from stoker.cache.accounting.implicit import ImplicitAccountant, ImplicitSettings
from stoker.cache.accounting.openai import OpenAIAccountant
from stoker.cache.accounting.outcome import CacheOutcome, MissFact
from stoker.cache.models import ModelInfo, model_info
from stoker.errors import ConfigError, InvalidRequest
from stoker.wire.dialects import openrouter

OPENAI_ENDPOINTS = ("OpenAI",)


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterSettings:
    """`sticky_seconds`: how long a sticky session outlives its last request."""

    sticky_seconds: float = 600.0

    def __post_init__(self) -> None:
        if self.sticky_seconds < 0:
            raise ConfigError("sticky_seconds cannot be negative")


@dataclass(slots=True)
class _Sticky:
    endpoint: str
    until: float


@dataclass(slots=True)
class _Routes:
    sticky: dict[tuple[str, str], _Sticky] = field(default_factory=dict)
    last: dict[tuple[str, str], str] = field(default_factory=dict)  # who served it before
    turns: dict[str, int] = field(default_factory=dict)  # load balancing, per model


@dataclass(frozen=True, slots=True, kw_only=True)
class Routed:
    """Where a request went, and what its upstream's cache did."""

    endpoint: str
    outcome: CacheOutcome


class OpenRouterAccountant:
    """OpenRouter's routing per account and the caches of its upstreams."""

    __slots__ = ("_routes", "_settings", "anthropic", "implicit", "openai")

    def __init__(
        self,
        settings: RouterSettings | None = None,
        *,
        anthropic: AnthropicAccountant | None = None,
        openai: OpenAIAccountant | None = None,
        implicit: ImplicitAccountant | None = None,
    ) -> None:
        self._settings = settings or RouterSettings()
        self.anthropic = anthropic or AnthropicAccountant()
        self.openai = openai or OpenAIAccountant()
        self.implicit = implicit or ImplicitAccountant(ImplicitSettings(mode="grid"))
        self._routes: dict[str, _Routes] = {}

    def reset(self) -> None:
        self._routes.clear()
        self.anthropic.reset()
        self.openai.reset()
        self.implicit.reset()

    def account(
        self,
        payload: dict[str, Any],
        *,
        at: float,
        workspace: str = "default",
        session_header: str | None = None,
        trusted: bool = False,
    ) -> Routed:
        """Route a Chat request that starts at `at` and bill it on its upstream's cache."""
        info = model_info(str(payload.get("model")))
        endpoints = info.endpoints or (OPENAI_ENDPOINTS if info.regime else ())
        if not endpoints:
            raise InvalidRequest(
                f"model {info.name!r} is not served through OpenRouter here",
                provider="openrouter",
                status=404,
                param="model",
            )
        routes = self._routes.setdefault(workspace, _Routes())
        key = openrouter.session_key(payload, session_header)
        conversation = key or _digest(openrouter.conversation(payload))
        slot = (info.name, conversation)
        endpoint, sticky = self._route(routes, payload, info.name, endpoints, slot, at)
        upstream = f"{workspace}|{endpoint}"
        outcome = self._bill(payload, info, at=at, upstream=upstream, trusted=trusted)
        before = routes.last.get(slot)
        routes.last[slot] = endpoint
        if before is not None and before != endpoint:
            fact = MissFact(cause="rerouted", where=endpoint, tokens=outcome.total_tokens)
            outcome = _with_fact(outcome, fact)
        if sticky and (key is not None or outcome.usage.read > 0):
            routes.sticky[slot] = _Sticky(
                endpoint=endpoint, until=at + self._settings.sticky_seconds
            )
        return Routed(endpoint=endpoint, outcome=outcome)

    def _route(
        self,
        routes: _Routes,
        payload: dict[str, Any],
        model: str,
        endpoints: tuple[str, ...],
        slot: tuple[str, str],
        at: float,
    ) -> tuple[str, bool]:
        """The upstream a request goes to, and whether stickiness applies to it."""
        prefs = payload.get("provider") if isinstance(payload.get("provider"), dict) else {}
        order = prefs.get("order") if prefs else None
        if isinstance(order, list) and order:
            named = [e for e in order if e in endpoints]
            if not named:
                raise InvalidRequest(
                    f"provider.order: none of {order!r} serves {model} (they are "
                    f"{', '.join(endpoints)})",
                    provider="openrouter",
                    param="provider.order",
                )
            return named[0], False
        held = routes.sticky.get(slot)
        if held is not None and held.until > at:
            return held.endpoint, True
        turn = routes.turns.get(model, 0)
        routes.turns[model] = turn + 1
        return endpoints[turn % len(endpoints)], True

    def _bill(
        self, payload: dict[str, Any], info: ModelInfo, *, at: float, upstream: str, trusted: bool
    ) -> CacheOutcome:
        if info.lookback:
            body = openrouter.anthropic_equivalent(payload)
            return self.anthropic.account(body, at=at, workspace=upstream)
        if info.regime:
            body = openrouter.openai_equivalent(payload)
            return self.openai.account(body, api="chat", at=at, org=upstream)
        return self.implicit.account(payload, info, at=at, workspace=upstream, trusted=trusted)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _with_fact(outcome: CacheOutcome, fact: MissFact) -> CacheOutcome:
    return replace(outcome, misses=(fact, *outcome.misses))
