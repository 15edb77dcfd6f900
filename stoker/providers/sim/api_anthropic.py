"""The simulator's Anthropic Messages API: what it refuses, what it reads, what it answers.

The checks are the Messages API's own, with its messages: `max_tokens` is required (0 is a
cache pre-warm), at least one message, `temperature` and `top_p` within [0, 1], thinking
budgets of at least 1,024 tokens and below `max_tokens`, no thinking with a forced tool
choice, a forced tool that exists. Documented in docs/provider-caching.md ("What the
simulator refuses").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stoker.cache.models import ModelInfo
from stoker.providers.sim.answer import Reply
from stoker.providers.sim.asks import (
    Ask,
    OutputFormat,
    integer,
    refuse,
    stop_strings,
    tool_names,
)
from stoker.wire.dialects import anthropic

P = "anthropic"
MIN_THINKING_BUDGET = 1024


def _unit(body: Mapping[str, Any], name: str) -> None:
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        refuse(P, f"{name}: Input should be a valid number", name)
    if value < 0:
        refuse(P, f"{name}: Input should be greater than or equal to 0", name)
    if value > 1:
        refuse(P, f"{name}: Input should be less than or equal to 1", name)


def _thinking(body: Mapping[str, Any], max_tokens: int) -> bool:
    """Whether extended thinking is on (after checking its budget)."""
    thinking = body.get("thinking")
    if thinking is None:
        return False
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind not in ("enabled", "disabled", "adaptive"):
        refuse(P, "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'", "thinking")
    if kind != "enabled":
        return bool(kind == "adaptive")
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        refuse(P, "thinking.enabled.budget_tokens: Field required", "thinking.budget_tokens")
    if budget < MIN_THINKING_BUDGET:
        refuse(
            P,
            "thinking.enabled.budget_tokens: Input should be greater than or equal to "
            f"{MIN_THINKING_BUDGET}",
            "thinking.budget_tokens",
        )
    if max_tokens and budget >= max_tokens:
        refuse(
            P,
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            "documentation at https://docs.claude.com/en/docs/build-with-claude/"
            "extended-thinking#max-tokens-and-context-window-size",
            "max_tokens",
        )
    return True


def _forced(body: Mapping[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind not in ("auto", "any", "tool", "none"):
        refuse(
            P, "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'", "tool_choice"
        )
    if kind in ("auto", "none"):
        return None
    tools = tool_names(P, body.get("tools"), "tools", lambda t: t)
    if not tools:
        refuse(
            P, "tool_choice: tool_choice may only be specified while providing tools", "tool_choice"
        )
    if kind == "any":
        return ""
    name = choice.get("name")
    if name not in tools:
        refuse(P, f"tool_choice.name: tool {name!r} was not found in tools", "tool_choice.name")
    return str(name)


def _format(body: Mapping[str, Any]) -> OutputFormat | None:
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        refuse(
            P, "output_config.format.type: Input should be 'json_schema'", "output_config.format"
        )
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping):
        refuse(P, "output_config.format.schema: Field required", "output_config.format.schema")
    return OutputFormat(kind="json_schema", schema=schema)


def ask(body: Mapping[str, Any], info: ModelInfo) -> Ask:
    """What `body` asks of its answer, refusing it as the Messages API would."""
    if "max_tokens" not in body:
        refuse(P, "max_tokens: Field required", "max_tokens")
    max_tokens = integer(P, body, "max_tokens", low=0)
    messages = body.get("messages")
    if messages is None:
        refuse(P, "messages: Field required", "messages")
    if messages == []:
        refuse(P, "messages: at least one message is required", "messages")
    _unit(body, "temperature")
    _unit(body, "top_p")
    integer(P, body, "top_k", low=0)
    stops = stop_strings(P, body.get("stop_sequences"), "stop_sequences", most=None)
    if any(not s.strip() for s in stops):
        refuse(
            P, "stop_sequences: each stop sequence must contain non-whitespace", "stop_sequences"
        )
    tool_names(P, body.get("tools"), "tools", lambda t: t)
    thinking = _thinking(body, max_tokens or 0)
    forced = _forced(body)
    if thinking and body.get("temperature") not in (None, 1, 1.0):
        refuse(P, "`temperature` may only be set to 1 when thinking is enabled.", "temperature")
    if thinking and forced is not None:
        refuse(P, "Thinking may not be enabled when tool_choice forces tool use.", "tool_choice")
    return Ask(max_tokens=max_tokens, stop=stops, output=_format(body), forced_tool=forced)


def response(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The Message object: the dialect's rendering, with the stop sequence that ended it."""
    out = anthropic.render_response(reply.message, reply.usage, reply.model)
    out["stop_sequence"] = reply.answer.stop_sequence
    return out
