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
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.accounting import (
    AnthropicAccountant,
    AnthropicSettings,
    CacheOutcome,
    OpenAIAccountant,
    OpenAISettings,
)
from stoker.cache.accounting.google import GoogleAccountant
from stoker.cache.models import ModelInfo, model_info
from stoker.cache.tokens import tokenizer_for
from stoker.errors import ConfigError, InvalidRequest
from stoker.providers.sim import api_anthropic, api_chat, api_gemini, api_responses, families
from stoker.providers.sim.answer import REASONING, Answer, Reply, shape
from stoker.providers.sim.api_openai import sim_id
from stoker.providers.sim.asks import Ask
from stoker.providers.sim.families import Families
from stoker.providers.sim.fulfil import fulfil
from stoker.providers.sim.model import RuleModel, SimModel
from stoker.providers.sim.responses_store import ResponseStore, Stored, input_items
from stoker.wire.blocks import (
    IMAGE_TYPES,
    MAX_IMAGE_BASE64,
    Block,
    ImageBlock,
    ImageRefBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from stoker.wire.dialects import dialect_module
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.dialects._shape import model_of
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
            if not isinstance(block, ImageBlock | ImageRefBlock):
                continue
            where = f"messages.{i}.content.{k}.image"
            if not info.images:
                problem = f"model {info.name!r} does not support image input"
            elif isinstance(block, ImageRefBlock):
                if not block.file_id and not block.url.startswith(("https://", "http://")):
                    problem = f"source.url must be an http(s) URL, not {block.url[:60]!r}"
                else:
                    continue  # accepted and never fetched: counted by the documented rule
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


def _openai_ids(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
    """The model's tool calls with OpenAI's `call_` ids (the sim model names them
    Anthropic's way, `toolu_`)."""
    return tuple(
        replace(b, id="call_" + b.id.removeprefix("toolu_"))
        if isinstance(b, ToolUseBlock) and b.id.startswith("toolu_")
        else b
        for b in blocks
    )


@dataclass(slots=True, kw_only=True)
class SimEngine:
    """State of one simulated provider: its model, cache entries, stored responses, and an
    id counter."""

    model: SimModel = field(default_factory=RuleModel)
    anthropic: AnthropicAccountant = field(
        default_factory=lambda: AnthropicAccountant(AnthropicSettings())
    )
    openai: OpenAIAccountant = field(default_factory=lambda: OpenAIAccountant(OpenAISettings()))
    families: Families = field(default_factory=Families)  # Bedrock, OpenRouter, DeepSeek, local
    google: GoogleAccountant = field(default_factory=GoogleAccountant)  # Gemini, caches too
    parsed: ChainMemo = field(default_factory=ChainMemo)
    responses: ResponseStore = field(default_factory=ResponseStore)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    # the simulated provider's account: what another engine made is not there to read
    account: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _paired: dict[str, tuple[Message, ...]] = field(default_factory=dict)  # per workspace

    def info(self, dialect: str, payload: dict[str, Any]) -> ModelInfo:
        """The facts of the model the payload names: a 404 for one the simulator does not
        serve, or one of another provider on this API."""
        if dialect in families.DIALECTS:
            return self.families.info(dialect, payload)
        if payload.get("model") is None:
            message = (
                "model: Field required"
                if dialect == "anthropic"
                else "Missing required parameter: 'model'."
            )
            raise InvalidRequest(message, provider="sim", param="model")
        model = model_of(payload)
        try:
            info = model_info(model)
        except ConfigError as exc:
            raise InvalidRequest(
                str(exc), provider="sim", status=404, param="model", code="model_not_found"
            ) from exc
        wanted = {"anthropic": "anthropic", "gemini": "google"}.get(dialect, "openai")
        if info.provider != wanted:
            raise InvalidRequest(
                f"model {model!r} is an {info.provider} model; this is the {dialect} API",
                provider="sim",
                status=404,
                param="model",
                code="model_not_found",
            )
        return info

    def expanded(
        self, dialect: str, payload: dict[str, Any], workspace: str, *, at: float = 0.0
    ) -> dict[str, Any]:
        """The payload with the context the provider adds: a Responses request's stored
        chain (`previous_response_id`) and referenced items, as one input; a Gemini
        request's explicit cache (`cachedContent`) in front of its contents."""
        if dialect == "gemini":
            return self.google.expand(payload, at=at, workspace=workspace)
        if dialect != "openai_responses":
            return payload
        if payload.get("previous_response_id") is None and not any(
            isinstance(i, dict) and i.get("type") == "item_reference"
            for i in payload.get("input") or ()
            if not isinstance(payload.get("input"), str)
        ):
            return payload
        context = self.responses.context_of(workspace, payload)
        return {k: v for k, v in payload.items() if k != "previous_response_id"} | {
            "input": context
        }

    def count(self, dialect: str, payload: dict[str, Any], *, workspace: str) -> int:
        """The input tokens of a request, as the token-counting endpoints answer: the
        prompt's total with its chain, no cache touched, nothing answered."""
        if dialect == "anthropic" and payload.get("messages") == []:
            raise InvalidRequest("messages: at least one message is required", param="messages")
        if dialect != "anthropic" and payload.get("input") == []:
            raise InvalidRequest(
                "Invalid 'input': empty array. Expected an array with minimum length 1, but got "
                "an empty array instead.",
                param="input",
                code="empty_array",
            )
        try:
            self.info(dialect, payload)
            sent = self.expanded(dialect, payload, workspace)
            if dialect == "anthropic":
                dialect_module(dialect).parse_request({"max_tokens": 0, **sent})
                counter = AnthropicAccountant(self.anthropic.settings)
                outcome = counter.account(sent, at=0.0, workspace="count")
            elif dialect == "gemini":
                dialect_module(dialect).parse_request(sent)
                return sum(tokens for _, tokens in self.google.units(sent, workspace=workspace))
            else:
                dialect_module(dialect).parse_request(sent)
                counted = OpenAIAccountant(self.openai.settings)
                outcome = counted.account(sent, api=_API[dialect], at=0.0, org="count")  # type: ignore[arg-type]
        except _MISSHAPEN as exc:
            raise InvalidRequest(
                f"the request does not have the shape of the {dialect} API: {exc!r:.300}",
                provider="sim",
            ) from exc
        return outcome.usage.input_total

    def handle(
        self,
        dialect: str,
        payload: dict[str, Any],
        *,
        at: float,
        workspace: str = "default",
        trusted: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> SimResult:
        """Check the request as the API would, account its cache effect at time `at`,
        answer it within what it asks, render the response.

        `trusted`: the caller never mutates the payload's dicts (true of what the dialects
        render), so parts seen in earlier calls may be recognized by identity. `headers`:
        the HTTP request's, where an API reads one (OpenRouter's `x-session-id`).
        """
        module = dialect_module(dialect)
        more = dialect in families.DIALECTS  # Bedrock, OpenRouter, DeepSeek, local servers
        extra: dict[str, Any] = {}
        try:
            info = self.info(dialect, payload)
            ask = (
                self.families.ask(dialect, payload, info)
                if more
                else _APIS[dialect].ask(payload, info)
            )
            sent = self.expanded(dialect, payload, workspace, at=at)
            request = module.parse_request(sent, memo=self.parsed, trusted=trusted)
            check_tool_pairing(request, checked=self._paired.get(workspace, ()))
            check_images(request, info, checked=self._paired.get(workspace, ()))
            prewarm = is_prewarm(dialect, payload, info)
            if more:
                outcome, extra = self.families.account(
                    dialect,
                    sent,
                    info,
                    at=at,
                    workspace=workspace,
                    trusted=trusted,
                    headers=headers,
                )
            elif dialect == "anthropic":
                outcome = self.anthropic.account(sent, at=at, workspace=workspace, trusted=trusted)
            elif dialect == "gemini":
                outcome = self.google.account(payload, at=at, workspace=workspace)
            else:
                outcome = self.openai.account(
                    sent,
                    api=_API[dialect],  # type: ignore[arg-type]
                    at=at,
                    org=workspace,
                    trusted=trusted,
                )
        except _MISSHAPEN as exc:
            if trusted:  # Stoker rendered it: a bug of ours, not the caller's
                raise
            raise InvalidRequest(
                f"the request does not have the shape of the {dialect} API: {exc!r:.300}",
                provider="sim",
            ) from exc
        self._paired[workspace] = request.messages
        tokens = tokenizer_for(info)
        if prewarm:  # Anthropic says why nothing came back; a Responses pre-warm completes
            stop = "max_tokens" if dialect == "anthropic" else "end_turn"
            answer = Answer(content=(), stop=stop, output_tokens=0)
        else:
            blocks = fulfil(self.model.respond(request), ask, request)
            answer = shape(blocks, ask, tokens)
        n = next(self._ids)
        content = answer.content
        if dialect != "anthropic":
            content = _openai_ids(content)
        if dialect == "openai_responses" and ask.reasoning and not prewarm:
            content = (_reasoning_block(ask, n), *content)
        message = AssistantMessage(content=content, stop_reason=answer.stop, id=_id(dialect, n))
        usage = replace(outcome.usage, output=answer.output_tokens * ask.n)
        reply = Reply(
            message=message,
            answer=answer,
            usage=usage,
            ask=ask,
            model=request.prefix.params.model,
            created=int(at),
            tokens=tokens,
        )
        if more:
            body = self.families.response(dialect, reply, payload, extra)
        else:
            body = _APIS[dialect].response(reply, payload)
        if dialect == "openai_responses" and payload.get("store", True) is not False:
            self.responses.put(workspace, Stored(body=body, context=tuple(input_items(sent))))
        return SimResult(body=body, message=message, outcome=outcome, usage=usage)


def _id(dialect: str, n: int) -> str:
    if dialect == "anthropic":
        return sim_id("msg_01", n, 22)
    if dialect == "gemini":
        return sim_id("", n, 22)
    if dialect.endswith("_chat"):  # Chat Completions and the APIs compatible with it
        return sim_id("chatcmpl-", n, 29)
    return sim_id("resp_", n, 48)


def _reasoning_block(ask: Ask, n: int) -> ThinkingBlock:
    """The reasoning item of a Responses reasoning model: its summary when asked for, its
    encrypted content (opaque, replayable) when `include` asks for it."""
    summary = REASONING if ask.reasoning_summary else ""
    encrypted = sim_id("gAAAAA", n, 64) if ask.encrypted_reasoning else ""
    return ThinkingBlock(thinking=summary, signature=encrypted)


# What reading a body of the wrong shape raises (a number where a name belongs, a list
# where an object does) before a check names it more precisely.
_MISSHAPEN = (KeyError, IndexError, TypeError, AttributeError, ValueError, OverflowError)

_APIS: dict[str, Any] = {
    "anthropic": api_anthropic,
    "openai_chat": api_chat,
    "openai_responses": api_responses,
    "gemini": api_gemini,
}
