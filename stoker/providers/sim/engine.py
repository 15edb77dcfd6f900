"""The simulator's core: a wire payload in, a provider response body out.

The in-process `SimProvider` and the HTTP server both call `SimEngine.handle`, so the
simulator always sees exactly what a provider would: the rendered payload, parsed back
with the same dialect code. Cache accounting is the providers' exact algorithm
(`stoker.cache.accounting`), keyed per workspace (API key) and model.

A call costs what is new in it: messages parsed, blocks counted and hashed by earlier
calls are found again in bounded memos, by content (any payload, HTTP included) or, for a
`trusted` payload that is never mutated (what `SimProvider` renders), by identity.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.accounting import (
    AnthropicAccountant,
    AnthropicSettings,
    CacheOutcome,
    OpenAIAccountant,
    OpenAISettings,
)
from stoker.cache.models import ModelInfo, model_info
from stoker.cache.tokens import estimate_tokens
from stoker.errors import ConfigError, InvalidRequest
from stoker.providers.sim.model import RuleModel, SimModel
from stoker.wire.blocks import (
    IMAGE_TYPES,
    MAX_IMAGE_BASE64,
    Block,
    ImageBlock,
    ToolUseBlock,
)
from stoker.wire.dialects import dialect_module
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

_API = {"openai_chat": "chat", "openai_responses": "responses"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    """A response body plus what the simulator knows about its cache effect."""

    body: dict[str, Any]
    message: AssistantMessage
    outcome: CacheOutcome
    usage: Usage


def check_tool_pairing(request: Request, *, checked: tuple[Message, ...] = ()) -> None:
    """Reject what real APIs reject: a tool_use not answered by the next user message.

    `checked` is an earlier request's history that passed: when this one starts with it,
    only what follows its last message needs looking at.
    """
    messages = request.messages
    start = 0
    if checked and messages[: len(checked)] == checked:  # identical objects compare at once
        start = len(checked) - 1
    for i in range(start, len(messages)):
        message = messages[i]
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered = (
            {r.tool_use_id for r in following.tool_results}
            if isinstance(following, UserMessage)
            else set()
        )
        missing = [c.id for c in message.tool_calls if c.id not in answered]
        if missing:
            raise InvalidRequest(
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.",
                provider="sim",
            )


def check_images(request: Request, info: ModelInfo, *, checked: tuple[Message, ...] = ()) -> None:
    """Reject the images a real API rejects: any, to a text-only model (`images = false`
    in the model facts); a type other than `IMAGE_TYPES`; data over `MAX_IMAGE_BASE64`.
    `checked` as for `check_tool_pairing`: an earlier request's history that passed."""
    messages = request.messages
    start = len(checked) if checked and messages[: len(checked)] == checked else 0
    for i in range(start, len(messages)):
        for k, block in enumerate(messages[i].content):
            if not isinstance(block, ImageBlock):
                continue
            where = f"messages.{i}.content.{k}.image"
            if not info.images:
                problem = f"model {info.name!r} does not support image input"
            elif block.media_type not in IMAGE_TYPES:
                problem = f"media_type {block.media_type!r} is not one of {', '.join(IMAGE_TYPES)}"
            elif len(block.data) > MAX_IMAGE_BASE64:
                size = f"{len(block.data)} bytes > {MAX_IMAGE_BASE64} bytes"
                problem = f"image exceeds 5 MB maximum: {size}"
            else:
                continue
            raise InvalidRequest(f"{where}: {problem}", provider="sim")


def is_prewarm(dialect: str, payload: dict[str, Any], info: ModelInfo) -> bool:
    """Whether the request only warms the cache (generates nothing, bills no output).

    Anthropic: `max_tokens: 0`, refused with `stream`, extended thinking, a forced tool
    choice or a structured output format. OpenAI: Responses `prompt_cache_options.prewarm`
    on GPT-5.6+; Chat has no such option. (docs/provider-caching.md, "Anthropic pre-warm"
    and "OpenAI prewarm".)
    """
    if dialect == "anthropic":
        if payload.get("max_tokens") != 0:
            return False
        thinking = (payload.get("thinking") or {}).get("type") == "enabled"
        choice = (payload.get("tool_choice") or {}).get("type")
        refused = [
            name
            for name, present in (
                ("`stream: true`", payload.get("stream") is True),
                ("extended thinking", thinking),
                ("a forced `tool_choice`", choice in ("tool", "any")),
                (
                    "`output_config.format`",
                    bool((payload.get("output_config") or {}).get("format")),
                ),
            )
            if present
        ]
        if refused:
            raise InvalidRequest(
                f"max_tokens: 0 (a cache pre-warm) cannot be combined with {', '.join(refused)}; "
                "send the pre-warm without it",
                provider="sim",
            )
        return True
    if not (payload.get("prompt_cache_options") or {}).get("prewarm"):
        return False
    if dialect != "openai_responses" or info.regime != "N":
        raise InvalidRequest(
            "prompt_cache_options.prewarm: only the Responses API of GPT-5.6 and later "
            f"models can pre-warm the cache ({dialect}, {info.name})",
            provider="sim",
        )
    return True


def output_tokens(blocks: tuple[Block, ...]) -> int:
    return max(estimate_tokens(blocks), 1)


@dataclass(slots=True, kw_only=True)
class SimEngine:
    """State of one simulated provider: its model, cache entries, and an id counter."""

    model: SimModel = field(default_factory=RuleModel)
    anthropic: AnthropicAccountant = field(
        default_factory=lambda: AnthropicAccountant(AnthropicSettings())
    )
    openai: OpenAIAccountant = field(default_factory=lambda: OpenAIAccountant(OpenAISettings()))
    parsed: ChainMemo = field(default_factory=ChainMemo)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _paired: dict[str, tuple[Message, ...]] = field(default_factory=dict)  # per workspace

    def handle(
        self,
        dialect: str,
        payload: dict[str, Any],
        *,
        at: float,
        workspace: str = "default",
        trusted: bool = False,
    ) -> SimResult:
        """Account the request's cache effect at time `at`, answer it, render the response.

        `trusted`: the caller never mutates the payload's dicts (true of what the dialects
        render), so parts seen in earlier calls may be recognized by identity.
        """
        module = dialect_module(dialect)
        request = module.parse_request(payload, memo=self.parsed, trusted=trusted)
        model = request.prefix.params.model
        try:
            info = model_info(model)
        except ConfigError as exc:
            raise InvalidRequest(str(exc), provider="sim", status=404) from exc
        wanted = "anthropic" if dialect == "anthropic" else "openai"
        if info.provider != wanted:
            raise InvalidRequest(
                f"model {model!r} is an {info.provider} model; this is the {dialect} API",
                provider="sim",
                status=404,
            )
        check_tool_pairing(request, checked=self._paired.get(workspace, ()))
        check_images(request, info, checked=self._paired.get(workspace, ()))
        self._paired[workspace] = request.messages
        prewarm = is_prewarm(dialect, payload, info)
        if dialect == "anthropic":
            outcome = self.anthropic.account(payload, at=at, workspace=workspace, trusted=trusted)
        else:
            api = _API[dialect]
            outcome = self.openai.account(payload, api=api, at=at, org=workspace, trusted=trusted)  # type: ignore[arg-type]
        blocks = () if prewarm else self.model.respond(request)
        if prewarm:  # Anthropic says why nothing came back; a Responses pre-warm completes
            stop = "max_tokens" if dialect == "anthropic" else "end_turn"
        else:
            stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else "end_turn"
        prefix = "msg_sim_" if dialect == "anthropic" else "resp_sim_"
        message = AssistantMessage(
            content=blocks, stop_reason=stop, id=f"{prefix}{next(self._ids):06d}"
        )
        usage = replace(outcome.usage, output=0 if prewarm else output_tokens(blocks))
        return SimResult(
            body=module.render_response(message, usage, model),
            message=message,
            outcome=outcome,
            usage=usage,
        )
