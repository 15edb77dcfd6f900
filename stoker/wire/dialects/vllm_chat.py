"""vLLM's OpenAI-compatible Chat Completions (`vllm serve`, automatic prefix caching).

The request is plain Chat Completions (`stoker.wire.dialects._local`). The answer reports
cache reads as `usage.prompt_tokens_details.cached_tokens` when the server runs with
`--enable-prompt-tokens-details`; without it, or with a null count, reads show as 0.
"""

from __future__ import annotations

from typing import Any

from stoker.wire.dialects import _local, openai_chat
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "vllm_chat"


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    return _local.render(request, shared=shared, extra={})


# A request and an answer read back as Chat's.
parse_request = openai_chat.parse_request
parse_response = openai_chat.parse_response


def usage_fields(usage: Usage, *, details: bool = True) -> dict[str, Any]:
    """vLLM's usage: the prompt total, and the cached tokens only when reported."""
    out: dict[str, Any] = {
        "prompt_tokens": usage.input_total,
        "completion_tokens": usage.output,
        "total_tokens": usage.input_total + usage.output,
    }
    if details:
        out["prompt_tokens_details"] = {"cached_tokens": usage.read}
    return out


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    return openai_chat.render_response(message, usage, model, usage_of=usage_fields)
