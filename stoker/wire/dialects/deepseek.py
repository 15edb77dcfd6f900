"""DeepSeek's Chat Completions payloads (`https://api.deepseek.com`, the OpenAI SDK).

DeepSeek's cache is automatic (docs/provider-caching.md, "DeepSeek"): a request carries
no marker and no key. The body is Chat Completions' with what DeepSeek reads: the output
limit is `max_tokens`; structured output is `{"type": "json_object"}` (DeepSeek takes no
JSON schema: the answer is validated against the type afterwards, as always). Thinking is
never replayed: `deepseek-reasoner` refuses a request whose messages carry its
`reasoning_content`, and the Chat dialect sends none. Usage reports the cache as
`prompt_cache_hit_tokens` / `prompt_cache_miss_tokens` at the top level of `usage`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stoker.errors import WireError
from stoker.wire.dialects import openai_chat
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "deepseek_chat"


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The body of `client.chat.completions.create(**body)` on DeepSeek."""
    if request.prefix.params.effort is not None:
        raise WireError("DeepSeek takes no reasoning effort; leave effort unset for deepseek:")
    if request.breakpoints or request.cache_key or request.cache_retention:
        request = replace(request, breakpoints=(), cache_key=None, cache_retention=None)
    body = openai_chat.render_request(request, shared=shared)
    body["max_tokens"] = body.pop("max_completion_tokens")
    if "response_format" in body:
        body["response_format"] = {"type": "json_object"}
    return body


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    return openai_chat.parse_request(body, memo=memo, trusted=trusted)


def usage_fields(usage: Usage) -> dict[str, Any]:
    """Chat's usage plus DeepSeek's own fields: hits and misses of the disk cache (every
    miss is written, at the input price: DeepSeek reports no writes)."""
    out = openai_chat.usage_fields(usage)
    out["prompt_tokens_details"] = {"cached_tokens": usage.read}
    out["prompt_cache_hit_tokens"] = usage.read
    out["prompt_cache_miss_tokens"] = usage.input_total - usage.read
    return out


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    out = openai_chat.render_response(message, usage, model)
    out["usage"] = usage_fields(usage)
    return out


def parse_response(body: Any) -> tuple[AssistantMessage, Usage]:
    """As Chat's: `prompt_cache_hit_tokens` is read when `prompt_tokens_details` is absent."""
    return openai_chat.parse_response(body)
