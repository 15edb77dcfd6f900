"""The simulator's Responses API: what it refuses, what it reads, what it answers.

The Response object echoes the request's settings as the API does (`instructions`,
`tools`, `tool_choice`, `text` with its format, `temperature`, `max_output_tokens`,
`store`, `metadata`, `reasoning`, `previous_response_id`, ...), since clients read them
back (structured-output parsers read `text.format`). Reasoning models spend reasoning
tokens and return a `reasoning` item, with its encrypted content when `include` asks for
it. `max_output_tokens` below 16 is refused, as OpenAI refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stoker.cache.models import ModelInfo
from stoker.providers.sim import api_openai as oa
from stoker.providers.sim.answer import Reply
from stoker.providers.sim.asks import Ask, integer, refuse, schema_format, tool_names
from stoker.wire.dialects import openai_responses

P = oa.P
MIN_OUTPUT_TOKENS = 16
INCLUDABLE = (
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
    "web_search_call.results",
)
SUMMARIES = ("auto", "concise", "detailed")
VERBOSITY = ("low", "medium", "high")


def _input(body: Mapping[str, Any]) -> None:
    given = body.get("input")
    if given is None and body.get("previous_response_id") is None:
        refuse(P, "Missing required parameter: 'input'.", "input", "missing_required_parameter")
    if given == [] or given == "":
        refuse(
            P,
            "Invalid 'input': empty array. Expected an array with minimum length 1, but got an "
            "empty array instead.",
            "input",
            "empty_array",
        )
    if given is not None and not isinstance(given, str | list):
        refuse(
            P, "Invalid type for 'input': expected a string or an array.", "input", "invalid_type"
        )


def _include(body: Mapping[str, Any]) -> tuple[str, ...]:
    given = body.get("include") or []
    if not isinstance(given, list):
        refuse(P, "Invalid type for 'include': expected an array.", "include", "invalid_type")
    for i, value in enumerate(given):
        if value not in INCLUDABLE:
            refuse(
                P,
                f"Invalid value: '{value}'. Supported values are: "
                + ", ".join(f"'{v}'" for v in INCLUDABLE)
                + ".",
                f"include[{i}]",
                "invalid_value",
            )
    return tuple(given)


def _reasoning(body: Mapping[str, Any], info: ModelInfo) -> tuple[str | None, str | None]:
    reasoning = body.get("reasoning")
    if reasoning is None:
        return None, None
    if not isinstance(reasoning, Mapping):
        refuse(P, "Invalid type for 'reasoning': expected an object.", "reasoning", "invalid_type")
    effort = oa.effort(reasoning.get("effort"), "reasoning.effort", info)
    summary = reasoning.get("summary")
    if summary is not None and summary not in SUMMARIES:
        refuse(P, f"Invalid value: '{summary}'.", "reasoning.summary", "invalid_value")
    if summary is not None and not info.reasons:
        oa.unsupported("reasoning.summary")
    return effort, summary


def ask(body: Mapping[str, Any], info: ModelInfo) -> Ask:
    """What `body` asks of its answer, refusing it as the Responses API would."""
    _input(body)
    oa.sampling(body, info)
    limit = integer(P, body, "max_output_tokens", low=MIN_OUTPUT_TOKENS)
    include = _include(body)
    effort, summary = _reasoning(body, info)
    text = body.get("text")
    if text is not None and not isinstance(text, Mapping):
        refuse(P, "Invalid type for 'text': expected an object.", "text", "invalid_type")
    text = text or {}
    if text.get("verbosity") not in (None, *VERBOSITY):
        refuse(P, f"Invalid value: '{text.get('verbosity')}'.", "text.verbosity", "invalid_value")
    output = schema_format(P, text.get("format"), "text.format", nested=False)
    top = integer(P, body, "top_logprobs", low=0, high=20)
    logprobs = "message.output_text.logprobs" in include
    if logprobs and info.reasons:
        oa.unsupported("message.output_text.logprobs")
    given = body.get("tools")
    functions = (
        [t for t in given if not isinstance(t, Mapping) or t.get("type", "function") == "function"]
        if isinstance(given, list)
        else given
    )
    tools = tool_names(P, functions, "tools", lambda t: t)
    choice = body.get("tool_choice")
    named = choice.get("name") if isinstance(choice, Mapping) else None
    return Ask(
        max_tokens=limit,
        output=output,
        forced_tool=oa.forced_tool(choice, tools, named),
        reasoning=info.reasons and effort != "none",
        reasoning_summary=summary is not None,
        encrypted_reasoning="reasoning.encrypted_content" in include,
        logprobs=(top or 0) if logprobs else None,
    )


def _tools(body: Mapping[str, Any]) -> list[Any]:
    out = []
    for tool in body.get("tools") or ():
        if isinstance(tool, Mapping) and tool.get("type", "function") == "function":
            out.append(
                {
                    "type": "function",
                    "name": tool.get("name"),
                    "description": tool.get("description"),
                    "parameters": tool.get("parameters"),
                    "strict": tool.get("strict", True),
                }
            )
        else:
            out.append(tool)
    return out


def _echo(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's settings as the Response carries them (defaults where not given)."""
    text = dict(body.get("text") or {})
    text.setdefault("format", {"type": "text"})
    text.setdefault("verbosity", "medium")
    reasoning = dict(body.get("reasoning") or {})
    return {
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
        "top_logprobs": body.get("top_logprobs", 0),
        "tools": _tools(body),
        "tool_choice": body.get("tool_choice", "auto"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "text": text,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": body.get("store", True),
        "background": False,
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "safety_identifier": body.get("safety_identifier"),
        "service_tier": "default",
        "truncation": body.get("truncation", "disabled"),
        "user": body.get("user"),
    }


def response(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The Response object: the dialect's rendering, the request echoed, the API's times,
    reasoning tokens and log probabilities."""
    ask = reply.ask
    out = openai_responses.render_response(reply.message, reply.usage, reply.model)
    out.update(_echo(body), created_at=reply.created)
    out["completed_at"] = reply.created if out["status"] == "completed" else None
    out["usage"]["output_tokens_details"]["reasoning_tokens"] = reply.answer.reasoning_tokens
    for item in out["output"]:
        if item.get("type") != "message":
            continue
        for part in item.get("content", ()):
            if part.get("type") == "output_text" and ask.logprobs is not None:
                part["logprobs"] = oa.logprobs(part["text"], reply.tokens, ask.logprobs)
            elif part.get("type") == "output_text":
                part["logprobs"] = []
    return out
