"""The simulator's Gemini API (`generateContent`): what it refuses, what it reads, what it
answers.

The checks are the API's own, with its messages: `contents` must be given and not empty;
`generationConfig` limits (`maxOutputTokens` at least 1, `temperature` in [0, 2], `topP`
in [0, 1], at most 5 `stopSequences`, one candidate); function names of letters, digits,
`_`, `.`, `:` and `-`; a `toolConfig` mode of AUTO, ANY, NONE or VALIDATED whose allowed
names exist; a JSON response schema only with `responseMimeType: application/json`.
Errors go out in Google's shape (`stoker.providers.sim.server_gemini`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stoker.cache.models import ModelInfo
from stoker.providers.sim.answer import REASONING, Reply
from stoker.providers.sim.asks import Ask, OutputFormat, refuse, stop_strings, tool_names
from stoker.wire.dialects import gemini

P = "google"
MODES = ("AUTO", "ANY", "NONE", "VALIDATED")


def _config(body: Mapping[str, Any]) -> Mapping[str, Any]:
    config = body.get("generationConfig") or {}
    if not isinstance(config, Mapping):
        refuse(P, "Invalid value at 'generation_config': expected an object", "generationConfig")
    return config


def _bounded(config: Mapping[str, Any], name: str, low: float, high: float) -> None:
    value = config.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        refuse(
            P,
            f"* GenerateContentRequest.generation_config.{name}: must be within "
            f"[{low:g}, {high:g}]",
            f"generationConfig.{name}",
        )


def _max_tokens(config: Mapping[str, Any]) -> int | None:
    value = config.get("maxOutputTokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        refuse(
            P,
            "* GenerateContentRequest.generation_config.max_output_tokens: must be positive",
            "generationConfig.maxOutputTokens",
        )
    return int(value)


def _declarations(tool: Mapping[str, Any]) -> list[Any]:
    found = tool.get("functionDeclarations")
    return list(found) if isinstance(found, list) else []


def _forced(body: Mapping[str, Any], names: list[str]) -> str | None:
    config = body.get("toolConfig")
    calling = (config or {}).get("functionCallingConfig") if isinstance(config, Mapping) else None
    if not isinstance(calling, Mapping):
        return None
    mode = str(calling.get("mode") or "AUTO").upper()
    if mode not in MODES:
        refuse(P, f"Invalid value at 'tool_config.function_calling_config.mode' ({mode})")
    allowed = calling.get("allowedFunctionNames") or []
    if allowed and mode not in ("ANY", "VALIDATED"):
        refuse(
            P,
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names:"
            " only allowed when mode is ANY or VALIDATED",
        )
    for name in allowed:
        if name not in names:
            refuse(P, f"Function {name!r} in allowed_function_names is not declared in tools")
    if mode != "ANY":
        return None
    if not names:
        refuse(P, "* GenerateContentRequest.tool_config: function calling mode ANY needs tools")
    return str(allowed[0]) if len(allowed) == 1 else ""


def _output(config: Mapping[str, Any]) -> OutputFormat | None:
    schema = config.get("responseJsonSchema", config.get("responseSchema"))
    mime = config.get("responseMimeType")
    if schema is not None and mime != "application/json":
        refuse(
            P,
            "* GenerateContentRequest.generation_config.response_mime_type: a response schema "
            "needs response_mime_type application/json",
        )
    if mime != "application/json":
        return None
    if schema is None:
        return OutputFormat(kind="json_object")
    if not isinstance(schema, Mapping):
        refuse(P, "* GenerateContentRequest.generation_config.response_json_schema: not an object")
    return OutputFormat(kind="json_schema", schema=schema)


def ask(body: Mapping[str, Any], info: ModelInfo) -> Ask:
    """What `body` asks of its answer, refusing it as the Gemini API would."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        refuse(P, "* GenerateContentRequest.contents: contents is not specified", "contents")
    config = _config(body)
    _bounded(config, "temperature", 0.0, 2.0)
    _bounded(config, "topP", 0.0, 1.0)
    count = config.get("candidateCount", 1)
    if count != 1:
        refuse(P, "Only one candidate can be specified", "generationConfig.candidateCount")
    stops = stop_strings(P, config.get("stopSequences"), "stopSequences", most=5)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        refuse(P, "Invalid value at 'tools': expected a list", "tools")
    names: list[str] = []
    for i, tool in enumerate(tools):
        if isinstance(tool, Mapping):
            names += tool_names(P, _declarations(tool), f"tools[{i}].functionDeclarations", dict)
    thinking = config.get("thinkingConfig") or {}
    reasons = bool(thinking) and thinking.get("thinkingBudget") != 0
    return Ask(
        max_tokens=_max_tokens(config),
        stop=stops,
        output=_output(config),
        forced_tool=_forced(body, names),
        reasoning=reasons,
        reasoning_summary=reasons and bool(thinking.get("includeThoughts")),
    )


def response(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The GenerateContentResponse: the dialect's rendering, with the thought summary in
    front when the request asked to include thoughts."""
    out = gemini.render_response(
        reply.message, reply.usage, reply.model, thoughts=reply.answer.reasoning_tokens
    )
    if reply.ask.reasoning_summary:
        parts = out["candidates"][0]["content"]["parts"]
        parts.insert(0, {"text": REASONING, "thought": True})
    return out
