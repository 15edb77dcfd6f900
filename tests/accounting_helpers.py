"""Builders of wire payloads whose blocks have an exact token count.

`"x " * n` is exactly n tokens with `count_tokens` (the Anthropic estimate), and
`" x" * n` is exactly n tokens in OpenAI's o200k_base, so every number of the worked
examples in docs/provider-caching.md can be asserted exactly.
"""

from __future__ import annotations

from typing import Any

from stoker.cache.accounting._openai_counts import MESSAGE_FRAME
from stoker.cache.tokens import count_tokens, tokenizer_named
from stoker.wire.dialects._chain import compact

AUTO = {"type": "ephemeral"}
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def pad(n: int, prefix: str = "") -> str:
    """Text of exactly `n` tokens that starts with `prefix`."""
    if prefix and not prefix[-1].isspace():
        prefix += " "
    text = prefix + "x " * (n - count_tokens(prefix))
    assert count_tokens(text) == n
    return text


def marker(ttl: str | None = None) -> dict[str, str]:
    return {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}


def text(
    n: int, *, prefix: str = "", ttl: str | None = None, cached: bool = False
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": pad(n, prefix)}
    if ttl or cached:
        block["cache_control"] = marker(ttl)
    return block


def tool(n: int = 2000, *, name: str = "read_file", ttl: str | None = None) -> dict[str, Any]:
    """An Anthropic tool definition of exactly `n` tokens."""
    fixed = count_tokens(name) + count_tokens(compact(SCHEMA))
    definition: dict[str, Any] = {
        "name": name,
        "description": pad(n - fixed),
        "input_schema": SCHEMA,
    }
    if ttl:
        definition["cache_control"] = marker(ttl)
    return definition


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def tool_use(i: int) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_{i:02d}",
        "name": "read_file",
        "input": {"path": f"f{i}"},
    }


def tool_result(i: int, n: int = 5) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": pad(n)}


def body(
    *messages: dict[str, Any],
    model: str = "claude-sonnet-4-6",
    system: list[dict[str, Any]] | str | None = None,
    tools: list[dict[str, Any]] | None = None,
    auto: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A Messages API body: tools 2,000 and system 1,000 tokens unless given."""
    payload: dict[str, Any] = {
        "model": model,
        "max_tokens": 1024,
        "tools": [tool()] if tools is None else tools,
        "system": [text(1000)] if system is None else system,
        "messages": list(messages),
    }
    if auto:
        payload["cache_control"] = AUTO
    payload.update(extra)
    return payload


O200K = tokenizer_named("o200k_base")


def openai_pad(n: int, prefix: str = "") -> str:
    """Text of exactly `n` o200k_base tokens that starts with `prefix`."""
    text = prefix + " x" * (n - O200K.count(prefix))
    assert O200K.count(text) == n
    return text


def frame(role: str) -> int:
    """Tokens OpenAI adds around a message of `role`: its 3 frame tokens and the role."""
    return MESSAGE_FRAME + O200K.count(role)


def openai_message(role: str, n: int, prefix: str = "", **extra: Any) -> dict[str, Any]:
    """An OpenAI message of exactly `n` tokens, frame included, as string content."""
    return {"role": role, "content": openai_pad(n - frame(role), prefix), **extra}


def part(
    n: int, *, prefix: str = "", ttl: str | None = None, kind: str = "input_text"
) -> dict[str, Any]:
    """An OpenAI text content part of exactly `n` tokens (its message's frame not
    included), optionally an explicit breakpoint."""
    value: dict[str, Any] = {"type": kind, "text": openai_pad(n, prefix)}
    if ttl:
        value["prompt_cache_breakpoint"] = {"mode": "explicit", "ttl": ttl}
    return value
