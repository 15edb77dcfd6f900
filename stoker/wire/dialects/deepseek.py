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

from typing import Any

from stoker.errors import WireError
from stoker.wire.dialects import _local, openai_chat
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "deepseek_chat"


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The body of `client.chat.completions.create(**body)` on DeepSeek."""
    if request.prefix.params.effort is not None:
        raise WireError("DeepSeek takes no reasoning effort; leave effort unset for deepseek:")
    body = _local.render(request, shared=shared, extra={})
    if "response_format" in body:
        body["response_format"] = {"type": "json_object"}
    return body


# A request and an answer read back as Chat's (whose parser reads
# `prompt_cache_hit_tokens` when `prompt_tokens_details` is absent).
parse_request = openai_chat.parse_request
parse_response = openai_chat.parse_response


def usage_fields(usage: Usage) -> dict[str, Any]:
    """Chat's usage plus DeepSeek's own fields: hits and misses of the disk cache (every
    miss is written, at the input price: DeepSeek reports no writes)."""
    out = openai_chat.usage_fields(usage)
    out["prompt_tokens_details"] = {"cached_tokens": usage.read}
    out["prompt_cache_hit_tokens"] = usage.read
    out["prompt_cache_miss_tokens"] = usage.input_total - usage.read
    return out


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    return openai_chat.render_response(message, usage, model, usage_of=usage_fields)
