"""The only place provider payloads are built and parsed.

Each dialect module offers four pure functions: `render_request(Request) -> dict`,
`parse_request(dict) -> Request` (used by the simulator, which must see what a provider
sees), `render_response(AssistantMessage, Usage, model) -> dict` and
`parse_response(dict) -> (AssistantMessage, Usage)`. Parsing what a provider sent
raises `WireError` and nothing else when it is not an answer of the API (`_shape`): a
provider that answers 200 with garbage is then one error the adapters can retry.

A rendered payload is its caller's own: a provider (or an SDK) may change it and the next
request is the same. Its dicts and lists would otherwise be the lineage's render memo,
reused by every later turn, fork and sub-agent, so one `payload["tools"].append(...)`
would silently move the prefix of all of them. `render_request(request, shared=True)`
returns the memo's own containers, without the copy, to a caller that never changes
them and wants to recognize them again by identity (the simulator's accountant).

`parse_request(body, memo=..., trusted=...)` reads each message or item once per memo
(a `_chain.ChainMemo`) and finds it again by content, or by identity when the caller
vouches the body is never mutated: the simulator parses only what a call adds.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Literal

from stoker.errors import ConfigError

Dialect = Literal["anthropic", "openai_chat", "openai_responses"]
DIALECTS: tuple[Dialect, ...] = ("anthropic", "openai_chat", "openai_responses")

# Bedrock's Converse API and the Chat Completions variants of OpenRouter, DeepSeek and
# the self-hosted servers: dialect name -> module.
MORE_DIALECTS: dict[str, str] = {
    "bedrock_converse": "bedrock",
    "openrouter_chat": "openrouter",
    "deepseek_chat": "deepseek",
    "vllm_chat": "vllm_chat",
    "llamacpp_chat": "llamacpp_chat",
    "gemini": "gemini",  # Gemini API generateContent (google-genai)
}


def dialect_module(name: str) -> ModuleType:
    """The module implementing dialect `name`."""
    if name == "anthropic":
        from stoker.wire.dialects import anthropic

        return anthropic
    if name == "openai_chat":
        from stoker.wire.dialects import openai_chat

        return openai_chat
    if name == "openai_responses":
        from stoker.wire.dialects import openai_responses

        return openai_responses
    if name in MORE_DIALECTS:
        return importlib.import_module(f"stoker.wire.dialects.{MORE_DIALECTS[name]}")
    raise ConfigError(
        f"unknown dialect {name!r}; expected one of {', '.join([*DIALECTS, *MORE_DIALECTS])}"
    )
