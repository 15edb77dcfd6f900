"""What the Chat Completions dialects of automatic caches share (DeepSeek, vLLM, llama.cpp).

Their cache needs no marker and no key (docs/provider-caching.md, "DeepSeek" and
"Self-hosted servers"): the body is Chat Completions' with the output limit as
`max_tokens` (the name every server reads), and what each engine adds (`cache_prompt`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stoker.wire.dialects import openai_chat
from stoker.wire.request import Request


def render(request: Request, *, shared: bool, extra: dict[str, Any]) -> dict[str, Any]:
    if request.breakpoints or request.cache_key or request.cache_retention:
        request = replace(request, breakpoints=(), cache_key=None, cache_retention=None)
    body = openai_chat.render_request(request, shared=shared)
    body["max_tokens"] = body.pop("max_completion_tokens")
    body.update(extra)
    return body
