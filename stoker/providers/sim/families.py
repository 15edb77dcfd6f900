"""The simulator's Bedrock, OpenRouter, DeepSeek and self-hosted servers: which models
each serves, what each refuses, how each bills its cache and what each answers.

`SimEngine` hands a request of one of these dialects to `Families` at three points (the
model's facts, what the answer must respect, the cache) and once more for the response
body; everything else (parsing, tool pairing, the model, shaping the answer) is the
engine's, as for Anthropic and OpenAI. Each family's cache is modelled by its own rules
(`stoker.cache.accounting`: `BedrockAccountant`, `OpenRouterAccountant`,
`ImplicitAccountant`, `SlotAccountant`); docs/provider-caching.md has them, with sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.accounting import AnthropicAccountant, CacheOutcome
from stoker.cache.accounting.bedrock import BedrockAccountant
from stoker.cache.accounting.implicit import ImplicitAccountant, ImplicitSettings
from stoker.cache.accounting.openrouter import OpenRouterAccountant
from stoker.cache.accounting.slots import SlotAccountant
from stoker.cache.models import ModelInfo, fallback_info, model_info
from stoker.errors import ConfigError, InvalidRequest
from stoker.providers.sim import api_anthropic, api_chat
from stoker.providers.sim.answer import Reply
from stoker.providers.sim.asks import Ask, integer, refuse
from stoker.wire.dialects import bedrock, deepseek, llamacpp_chat, openrouter, vllm_chat

DIALECTS = frozenset(
    {"bedrock_converse", "openrouter_chat", "deepseek_chat", "vllm_chat", "llamacpp_chat"}
)
FAMILY = {  # the model family each dialect serves ("local": any model a server loads)
    "bedrock_converse": "bedrock",
    "openrouter_chat": "openrouter",
    "deepseek_chat": "deepseek",
    "vllm_chat": "local",
    "llamacpp_chat": "local",
}
ENGINES = {"vllm": "vllm_chat", "llamacpp": "llamacpp_chat"}  # --cache: the local server


def dialect_of(info: ModelInfo, local: str = "vllm") -> str | None:
    """The dialect that serves a model of these families (None: Anthropic's or OpenAI's)."""
    if info.provider == "local":
        return ENGINES[local]
    for dialect, family in FAMILY.items():
        if family == info.provider:
            return dialect
    return None


def vllm() -> ImplicitAccountant:
    """vLLM's automatic prefix caching: 16-token blocks, the last token recomputed."""
    return ImplicitAccountant(ImplicitSettings(mode="grid", unit=16, cap_last_token=True))


@dataclass(slots=True, kw_only=True)
class Families:
    """The cache state of the simulated Bedrock, OpenRouter, DeepSeek, vLLM and llama.cpp.

    `report_cached_tokens`: the vLLM server runs with `--enable-prompt-tokens-details`
    (without it its usage names no cached tokens).
    """

    bedrock: BedrockAccountant = field(
        default_factory=lambda: BedrockAccountant(AnthropicAccountant())
    )
    openrouter: OpenRouterAccountant = field(default_factory=OpenRouterAccountant)
    deepseek: ImplicitAccountant = field(
        default_factory=lambda: ImplicitAccountant(ImplicitSettings(mode="units"))
    )
    vllm: ImplicitAccountant = field(default_factory=vllm)
    llamacpp: SlotAccountant = field(default_factory=SlotAccountant)
    report_cached_tokens: bool = True

    def reset(self) -> None:
        for accountant in (self.bedrock, self.openrouter, self.deepseek, self.vllm, self.llamacpp):
            accountant.reset()

    def info(self, dialect: str, payload: Mapping[str, Any]) -> ModelInfo:
        """The model's facts: a 404 for one this API does not serve."""
        key = "modelId" if dialect == "bedrock_converse" else "model"
        model = payload.get(key)
        if not isinstance(model, str) or not model:
            raise InvalidRequest(f"{key}: a model's name is required", provider="sim", param=key)
        family = FAMILY[dialect]
        if family == "local":  # a server serves whatever it loaded, under any name
            info = fallback_info(model, "local")
            return (
                info
                if info.provider == "local"
                else replace(fallback_info("", "local"), name=model)
            )
        try:
            info = model_info(model)
        except ConfigError as exc:
            raise InvalidRequest(
                str(exc), provider="sim", status=404, param=key, code="model_not_found"
            ) from exc
        served = info.provider == family or (dialect == "openrouter_chat" and info.regime)
        if not served:
            raise InvalidRequest(
                f"model {model!r} is an {info.provider} model; this is the {dialect} API",
                provider="sim",
                status=404,
                param=key,
                code="model_not_found",
            )
        return info

    def ask(self, dialect: str, payload: Mapping[str, Any], info: ModelInfo) -> Ask:
        """What the answer must respect, refusing the request as the API would."""
        if dialect != "bedrock_converse":
            # These APIs name the output limit `max_tokens`, whatever the model.
            if "max_tokens" in payload and "max_completion_tokens" not in payload:
                limit = payload["max_tokens"]
                payload = {k: v for k, v in payload.items() if k != "max_tokens"}
                payload["max_completion_tokens"] = limit
            return api_chat.ask(payload, info)
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            refuse("bedrock", "messages: at least one message is required", "messages")
        inference = payload.get("inferenceConfig") or {}
        integer("bedrock", inference, "maxTokens", low=1)
        return api_anthropic.ask(bedrock.anthropic_equivalent(dict(payload)), info)

    def account(
        self,
        dialect: str,
        payload: dict[str, Any],
        info: ModelInfo,
        *,
        at: float,
        workspace: str,
        trusted: bool,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[CacheOutcome, dict[str, Any]]:
        """The request's cache effect, and what its response adds (the upstream that
        served an OpenRouter request)."""
        if dialect == "bedrock_converse":
            return self.bedrock.account(payload, at=at, workspace=workspace), {}
        if dialect == "openrouter_chat":
            header = (headers or {}).get("x-session-id")
            routed = self.openrouter.account(
                payload, at=at, workspace=workspace, session_header=header, trusted=trusted
            )
            return routed.outcome, {"provider": routed.endpoint}
        accountant: ImplicitAccountant | SlotAccountant
        if dialect == "deepseek_chat":
            accountant = self.deepseek
        elif dialect == "vllm_chat":
            accountant = self.vllm
        else:
            accountant = self.llamacpp
        return accountant.account(payload, info, at=at, workspace=workspace, trusted=trusted), {}

    def response(
        self, dialect: str, reply: Reply, payload: Mapping[str, Any], extra: dict[str, Any]
    ) -> dict[str, Any]:
        """The response body, with each API's usage fields."""
        usage = reply.usage
        if dialect == "bedrock_converse":
            return bedrock.render_response(reply.message, usage, reply.model)
        out = api_chat.response(reply, payload)
        chat_usage = {
            k: out["usage"][k] for k in ("completion_tokens", "completion_tokens_details")
        }
        if dialect == "openrouter_chat":
            price = model_info(reply.model).price
            cost = price.cost(usage) if price is not None else None
            out["usage"] = {**openrouter.usage_fields(usage, cost), **chat_usage}
            out.update(extra)
        elif dialect == "deepseek_chat":
            out["usage"] = {**deepseek.usage_fields(usage), **chat_usage}
            out.pop("service_tier", None)
        elif dialect == "vllm_chat":
            fields = vllm_chat.usage_fields(usage, details=self.report_cached_tokens)
            out["usage"] = {**fields, "completion_tokens": chat_usage["completion_tokens"]}
            out.pop("service_tier", None)
        else:
            speeds = self.llamacpp.settings
            out["usage"] = {
                **llamacpp_chat.usage_fields(usage),
                "completion_tokens": chat_usage["completion_tokens"],
            }
            out["timings"] = llamacpp_chat.timings(
                usage,
                prefill_per_second=speeds.prefill_per_second,
                decode_per_second=speeds.decode_per_second,
            )
            out.pop("service_tier", None)
        out["usage"]["total_tokens"] = usage.input_total + out["usage"]["completion_tokens"]
        return out


def chat_like(dialect: str) -> bool:
    """Whether the dialect is Chat Completions on the wire (its stream is Chat's)."""
    return dialect == "openai_chat" or (dialect in DIALECTS and dialect != "bedrock_converse")
