"""What a request asks of its answer, as one value the three simulated APIs share.

Each API spells its limits, stop sequences, choices, output formats and forced tool
calls its own way; `stoker.providers.sim.api_*` read them off the body (refusing what the
real API refuses) into an `Ask`, and the simulator shapes every answer by that value
alone. The helpers below are the checks all three make, each raising the error the
provider sends, with the parameter it names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from stoker.errors import InvalidRequest

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """A structured output: JSON valid against `schema` (`json_schema`), or any JSON
    object (`json_object`, no schema). `strict` is OpenAI's strict mode."""

    kind: Literal["json_schema", "json_object"]
    schema: Mapping[str, Any] | None = None
    name: str = ""
    strict: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """What the answer must respect.

    `max_tokens`: the output limit (None: only the model's own). `forced_tool`: None when
    the model may answer in text, "" when it must call some tool, a name when that tool.
    `reasoning`: the model spends hidden reasoning tokens (OpenAI reasoning models);
    `reasoning_summary` asks for their summary and `encrypted_reasoning` for the
    replayable item. `logprobs`: how many alternatives per token were asked for (None:
    no log probabilities).
    """

    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    output: OutputFormat | None = None
    forced_tool: str | None = None
    reasoning: bool = False
    reasoning_summary: bool = False
    encrypted_reasoning: bool = False
    logprobs: int | None = None


def refuse(
    provider: str, message: str, param: str | None = None, code: str | None = None
) -> NoReturn:
    """Raise the provider's 400 for `param`."""
    raise InvalidRequest(message, provider=provider, param=param, code=code)


def integer(
    provider: str, body: Mapping[str, Any], name: str, *, low: int, high: int | None = None
) -> int | None:
    """`body[name]` when it is an integer within [low, high]; None when absent."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        refuse(
            provider,
            f"Invalid type for '{name}': expected an integer, but got "
            f"{type(value).__name__} instead.",
            name,
            "invalid_type",
        )
    if value < low:
        refuse(
            provider,
            f"Invalid '{name}': integer below minimum value. Expected a value >= {low}, "
            f"but got {value} instead.",
            name,
            "integer_below_min_value",
        )
    if high is not None and value > high:
        refuse(
            provider,
            f"Invalid '{name}': integer above maximum value. Expected a value <= {high}, "
            f"but got {value} instead.",
            name,
            "integer_above_max_value",
        )
    return int(value)


def number(
    provider: str, body: Mapping[str, Any], name: str, *, low: float, high: float
) -> float | None:
    """`body[name]` when it is a number within [low, high]; None when absent."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        refuse(
            provider,
            f"Invalid type for '{name}': expected a number, but got {type(value).__name__} "
            "instead.",
            name,
            "invalid_type",
        )
    if not low <= value <= high:
        side = "below minimum" if value < low else "above maximum"
        bound = f">= {low:g}" if value < low else f"<= {high:g}"
        refuse(
            provider,
            f"Invalid '{name}': decimal {side} value. Expected a value {bound}, but got "
            f"{value:g} instead.",
            name,
            "decimal_below_min_value" if value < low else "decimal_above_max_value",
        )
    return float(value)


def tool_names(
    provider: str, tools: Any, param: str, spec_of: Callable[[Mapping[str, Any]], Any]
) -> list[str]:
    """The names of `tools` (a list of tool objects, each spec found by `spec_of`), after
    the checks both APIs make: a name of letters, digits, `_` and `-`, a text
    description, an object schema."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        refuse(provider, f"Invalid type for '{param}': expected an array.", param, "invalid_type")
    names = []
    for i, tool in enumerate(tools):
        where = f"{param}[{i}]"
        spec = spec_of(tool) if isinstance(tool, Mapping) else None
        if not isinstance(spec, Mapping):
            refuse(
                provider, f"Invalid type for '{where}': expected an object.", where, "invalid_type"
            )
        name = spec.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            refuse(
                provider,
                f"Invalid '{where}.name': a string of 1 to 128 letters, digits, '_' or '-' is "
                "required.",
                f"{where}.name",
                "invalid_value",
            )
        for key in ("description",):
            if spec.get(key) is not None and not isinstance(spec[key], str):
                refuse(
                    provider,
                    f"Invalid type for '{where}.{key}': expected a string.",
                    f"{where}.{key}",
                )
        for key in ("input_schema", "parameters"):
            if spec.get(key) is not None and not isinstance(spec[key], Mapping):
                refuse(
                    provider,
                    f"Invalid type for '{where}.{key}': expected an object.",
                    f"{where}.{key}",
                )
        names.append(name)
    return names


def stop_strings(provider: str, value: Any, name: str, *, most: int | None) -> tuple[str, ...]:
    """Stop sequences given as a string or a list of strings (at most `most`)."""
    if value is None:
        return ()
    given = [value] if isinstance(value, str) else value
    if not isinstance(given, list) or not all(isinstance(s, str) for s in given):
        refuse(provider, f"Invalid '{name}': expected a string or an array of strings.", name)
    if most is not None and len(given) > most:
        refuse(
            provider,
            f"Invalid '{name}': array too long. Expected an array with maximum length {most}, "
            f"but got an array with length {len(given)} instead.",
            name,
            "array_above_max_length",
        )
    return tuple(s for s in given if s)


def schema_format(provider: str, fmt: Any, param: str, *, nested: bool) -> OutputFormat | None:
    """An OpenAI output format: `{"type": "json_schema", ...}` (its name, schema and strict
    flag under `json_schema` for Chat, beside `type` for Responses), `json_object` or
    `text` (None)."""
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") not in (
        "text",
        "json_object",
        "json_schema",
    ):
        refuse(
            provider,
            f"Invalid '{param}.type': expected one of 'text', 'json_object' or 'json_schema'.",
            f"{param}.type",
            "invalid_value",
        )
    kind = fmt["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputFormat(kind="json_object")
    spec = fmt.get("json_schema") if nested else fmt
    where = f"{param}.json_schema" if nested else param
    if not isinstance(spec, Mapping):
        refuse(
            provider, f"Missing required parameter: '{where}'.", where, "missing_required_parameter"
        )
    name = spec.get("name")
    if not isinstance(name, str) or not name or len(name) > 64 or not _NAME.fullmatch(name):
        refuse(
            provider,
            f"Invalid '{where}.name': a name of 1 to 64 letters, digits, '_' or '-' is required.",
            f"{where}.name",
            "invalid_value",
        )
    schema = spec.get("schema")
    if schema is None:
        schema = {}
    if not isinstance(schema, Mapping):
        refuse(provider, f"Invalid '{where}.schema': expected an object.", f"{where}.schema")
    strict = spec.get("strict") is True
    if strict:
        problem = strict_problem(schema)
        if problem is not None:
            refuse(
                provider,
                f"Invalid schema for response_format '{name}': {problem}",
                f"{where}.schema" if nested else "text.format.schema",
                "invalid_json_schema",
            )
    return OutputFormat(kind="json_schema", schema=schema, name=name, strict=strict)


def strict_problem(
    schema: Mapping[str, Any], path: tuple[str, ...] = (), depth: int = 0
) -> str | None:
    """What makes `schema` unfit for OpenAI's strict mode (every object closed with
    `additionalProperties: false` and listing each property as required), or None."""
    where = f"In context={path!r}"
    if depth > 64:
        return f"{where}, the schema is nested too deeply."
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return f"{where}, 'additionalProperties' is required to be supplied and to be false."
        props = schema.get("properties") or {}
        missing = [k for k in props if k not in (schema.get("required") or ())]
        if missing:
            return (
                f"{where}, 'required' is required to be supplied and to be an array including "
                f"every key in properties. Missing '{missing[0]}'."
            )
    for key, value in _children(schema):
        if isinstance(value, Mapping):
            found = strict_problem(value, (*path, *key), depth + 1)
            if found is not None:
                return found
    return None


def _children(schema: Mapping[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    for key in ("properties", "$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            out.extend(((key, str(k)), v) for k, v in found.items())
    for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
        found = schema.get(key)
        if isinstance(found, list):
            out.extend(((key, str(i)), v) for i, v in enumerate(found))
    if isinstance(schema.get("items"), Mapping):
        out.append((("items",), schema["items"]))
    return out
