"""Schemas from Python functions, and argument validators, for `stoker.tools.tool`.

The schema is part of the request prefix, so it must be the same bytes in every
process and every run: pydantic generates it, then we remove what varies or wastes
tokens (the `title` keys pydantic derives from names, and the order of set-valued
defaults, which follows the per-process string hash). `Tool` serializes the result
with `canonical_json`, which sorts keys.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections import ChainMap
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import to_jsonable_python

from stoker.errors import ToolError
from stoker.tools.context import ToolContext
from stoker.wire.canonical import canonical_json


class ArgumentError(ValueError):
    """The model's arguments do not fit the schema; the message is written for the model."""


Validator = Callable[[Any], dict[str, Any]]
"""Turns the model's parsed arguments into keyword arguments, or raises ArgumentError."""


# -- docstrings --------------------------------------------------------------------------

_SECTION = re.compile(r"^(Args|Arguments):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The first paragraph (lines joined by spaces) and the Google-style `Args:` entries."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary.append(line.strip())
    args: dict[str, list[str]] = {}
    header = next((i for i, line in enumerate(lines) if _SECTION.match(line.strip())), None)
    if header is not None:
        base = _indent(lines[header])
        entry_indent: int | None = None
        current: list[str] | None = None
        for line in lines[header + 1 :]:
            if not line.strip():
                continue
            indent = _indent(line)
            if indent <= base:
                break  # the next section ("Returns:", ...) or prose after the list
            if entry_indent is None:
                entry_indent = indent
            match = _ENTRY.match(line.strip()) if indent == entry_indent else None
            if match:
                current = args.setdefault(match["name"], [])
                current.append(match["text"].strip())
            elif current is not None:
                current.append(line.strip())
    return " ".join(summary), {k: " ".join(p for p in v if p) for k, v in args.items()}


# -- schemas -----------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then")
_SCHEMA_ONE_MORE = ("else", "unevaluatedProperties", "unevaluatedItems")


def strip_titles(schema: Any) -> Any:
    """A copy of a JSON schema without `title` annotations.

    Only schema positions are visited: a property *named* "title", or a "title" key
    inside a `default`/`enum`/`const` value, is data and is kept.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: strip_titles(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [strip_titles(v) for v in value]
        elif key in _SCHEMA_ONE or key in _SCHEMA_ONE_MORE:
            out[key] = strip_titles(value)
        else:
            out[key] = value
    return out


class _StableSchema(GenerateJsonSchema):
    """pydantic's generator, with set-valued defaults written in sorted order.

    pydantic writes a `frozenset({"a", "b"})` default in iteration order, which for
    strings depends on PYTHONHASHSEED: two processes would send different tool bytes.
    """

    def encode_default(self, dft: Any) -> Any:
        return super().encode_default(self._sorted_sets(dft))

    def _sorted_sets(self, value: Any) -> Any:
        if isinstance(value, set | frozenset):
            items = [self._sorted_sets(v) for v in value]
            return sorted(items, key=lambda v: canonical_json(to_jsonable_python(v)))
        if isinstance(value, dict):
            return {k: self._sorted_sets(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._sorted_sets(v) for v in value)
        return value


def _is_context(annotation: Any) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation is ToolContext


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    # Hints are strings under `from __future__ import annotations`; they resolve in the
    # function's module. ToolContext resolves even when imported only for type checking.
    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    localns = ChainMap(globalns, {"ToolContext": ToolContext})
    return typing.get_type_hints(fn, globalns=globalns, localns=localns, include_extras=True)


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of the parameter annotated `ToolContext`, if any (best effort, never fails)."""
    try:
        hints = _hints(fn)
    except Exception:
        return None
    return next((name for name, hint in hints.items() if _is_context(hint)), None)


def schema_from_function(
    fn: Callable[..., Any], name: str, descriptions: dict[str, str]
) -> tuple[dict[str, Any], Validator, str | None]:
    """(input_schema, validator, context parameter name) for a typed function.

    Fields get internal names and the parameter names as aliases, so parameters such
    as `schema`, `json` or `model_id` never clash with pydantic's own attributes.
    """
    try:
        hints = _hints(fn)
    except Exception as exc:
        raise ToolError(
            f"tool {name}: cannot resolve the type hints of {fn!r} ({type(exc).__name__}: "
            f"{exc}); define the types it uses at module level"
        ) from exc
    fields: dict[str, Any] = {}
    aliases: dict[str, str] = {}
    context: str | None = None
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ToolError(
                f"tool {name}: parameter {param.name!r} is {param.kind.description}; tools "
                "are called with keyword arguments only"
            )
        if param.name not in hints:
            raise ToolError(
                f"tool {name}: parameter {param.name!r} has no type hint; the model needs "
                "one to know what to send"
            )
        hint = hints[param.name]
        if _is_context(hint):
            context = param.name
            continue
        default = ... if param.default is param.empty else param.default
        info = pydantic.Field(
            default, alias=param.name, description=descriptions.get(param.name) or None
        )
        fields[f"p{index}"] = (hint, info)
        aliases[f"p{index}"] = param.name
    config = pydantic.ConfigDict(extra="forbid", protected_namespaces=())
    try:
        model = pydantic.create_model(f"{name}_arguments", __config__=config, **fields)
        raw = model.model_json_schema(schema_generator=_StableSchema)
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as e:
        raise ToolError(f"tool {name}: cannot build a JSON schema: {e}") from e
    raw.pop("description", None)
    schema = strip_titles(raw)
    schema.setdefault("properties", {})

    def validate(arguments: Any) -> dict[str, Any]:
        try:
            parsed = model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ArgumentError(concise(exc)) from None
        return {aliases[f]: getattr(parsed, f) for f in parsed.model_fields_set}

    return schema, validate, context


def concise(exc: pydantic.ValidationError) -> str:
    """pydantic's errors as one line per problem: `path: message`."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


# -- raw schemas -------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def minimal_validator(schema: dict[str, Any]) -> Validator:
    """A small check for schemas we did not author (no jsonschema dependency).

    Checks what the model most often gets wrong: an object, the required keys, no
    unknown keys when the schema forbids them, and the top-level JSON type of each
    declared property. Deeper constraints are the tool's own business.
    """
    properties: dict[str, Any] = schema.get("properties") or {}
    required: list[str] = list(schema.get("required") or [])
    closed = schema.get("additionalProperties") is False

    def validate(arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ArgumentError(f"(arguments): expected a JSON object, got {_json_type(arguments)}")
        problems = [f"{key}: Field required" for key in required if key not in arguments]
        if closed:
            problems += [
                f"{k}: Extra inputs are not permitted" for k in arguments if k not in properties
            ]
        for key, value in arguments.items():
            expected = (properties.get(key) or {}).get("type")
            names = [expected] if isinstance(expected, str) else list(expected or [])
            if names and not any(_matches(value, n) for n in names):
                problems.append(f"{key}: expected {' or '.join(names)}, got {_json_type(value)}")
        if problems:
            raise ArgumentError("; ".join(problems))
        return dict(arguments)

    return validate


def _matches(value: Any, type_name: str) -> bool:
    kinds = _JSON_TYPES.get(type_name)
    if kinds is None:
        return True
    if isinstance(value, bool) and type_name != "boolean":
        return False
    return isinstance(value, kinds)


def _json_type(value: Any) -> str:
    return next((n for n in _JSON_TYPES if _matches(value, n)), "unknown")
