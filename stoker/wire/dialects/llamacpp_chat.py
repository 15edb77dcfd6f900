"""llama.cpp's `llama-server` Chat Completions (`/v1/chat/completions`, slots).

The request is Chat Completions with `cache_prompt: true`, which asks the server to
reuse the slot's KV cache (the default of current builds, sent so an older build does
too). The answer reports the reuse as `usage.prompt_tokens_details.cached_tokens` and,
in every build, as `timings.cache_n` beside `timings.prompt_n` (the tokens evaluated)
and `timings.prompt_ms`: the prefill time the cache saved is measured there.
"""

from __future__ import annotations

from typing import Any

from stoker.wire.dialects import _local, openai_chat
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "llamacpp_chat"


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    return _local.render(request, shared=shared, extra={"cache_prompt": True})


# A request and an answer read back as Chat's (whose parser reads `timings.cache_n`
# from a build that reports nothing else).
parse_request = openai_chat.parse_request
parse_response = openai_chat.parse_response


def usage_fields(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_total,
        "completion_tokens": usage.output,
        "total_tokens": usage.input_total + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.read},
    }


def timings(usage: Usage, *, prefill_per_second: float, decode_per_second: float) -> dict[str, Any]:
    """llama-server's `timings` for a call: reused and evaluated prompt tokens, and the
    time each phase took at the given speeds."""
    prompt_ms = usage.uncached / prefill_per_second * 1000
    predicted_ms = usage.output / decode_per_second * 1000
    return {
        "cache_n": usage.read,
        "prompt_n": usage.uncached,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(1000 / prefill_per_second, 3),
        "prompt_per_second": prefill_per_second,
        "predicted_n": usage.output,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": round(1000 / decode_per_second, 3),
        "predicted_per_second": decode_per_second,
    }


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    return openai_chat.render_response(message, usage, model, usage_of=usage_fields)


def prefill_saved(body: Any) -> tuple[int, float] | None:
    """(tokens reused, seconds of prefill they saved) from a response's `timings`, at the
    server's own measured prefill speed; None when it reports no timings."""
    found = body.get("timings") if isinstance(body, dict) else None
    if not isinstance(found, dict):
        return None
    reused, speed = found.get("cache_n"), found.get("prompt_per_second")
    if not isinstance(reused, int) or not isinstance(speed, int | float) or speed <= 0:
        return None
    return reused, reused / float(speed)
