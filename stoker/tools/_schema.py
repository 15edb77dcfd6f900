"""Schemas from Python functions, and argument validators, for `stoker.tools.tool`.

The schema is part of the request prefix, so it must be the same bytes in every
process and every run: pydantic generates it, then we remove what varies or wastes
tokens (the `title` keys pydantic derives from names, and the order of set-valued
defaults, which follows the per-process string hash). `Tool` serializes the result
with `canonical_json`, which sorts keys.

Descriptions come from the docstring, read by `docstring_parser` (a maintained library
without dependencies) in any of the four styles people write: Google, Sphinx (reST),
NumPy and Epydoc. Stoker's own reader knew only Google's `Args:`, and parameters
documented otherwise reached the model without a description, silently. Google
docstrings still read exactly as that reader read them, since sessions store tool bytes:
`_read_google` keeps the two tolerances it had, and the tests pin its results. What
cannot be read is said: `doc_problems` names each parameter left without a description.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from docstring_parser import Docstring, ParseError, epydoc, numpydoc, rest
from docstring_parser.google import GoogleParser, Section, SectionType
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


class ToolDocWarning(UserWarning):
    """A tool's docstring leaves a parameter without a description, or describes one the
    function does not have. The tool still works; the message names tool and parameter."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDocs:
    """What a docstring tells the model: a summary and one description per parameter.

    `params` holds every parameter entry found (an empty string for an entry without
    text); `unreadable` says why a parameter section could not be read, if one could not.
    """

    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)
    unreadable: str | None = None


# Google's parameter sections. Only these are sections to the Google reader: any other
# line at the margin ("Returns:", "Raises:", prose) ends one, and the summary runs on to
# the first blank line, as Stoker's reader before docstring_parser had it.
_GOOGLE_TITLES = (
    *("Args", "Arguments", "Parameters", "Params"),
    *("Keyword Args", "Keyword Arguments", "Other Parameters"),
)
_GOOGLE = GoogleParser([Section(t, "param", SectionType.MULTIPLE) for t in _GOOGLE_TITLES])
_GOOGLE_HEADER = re.compile(rf"^[ \t]*(?:{'|'.join(_GOOGLE_TITLES)}):[ \t]*$", re.M)
_GOOGLE_ENTRY = re.compile(  # `name:`, `*name (type):`, the type nesting parentheses once
    r"\s*\*{0,2}\w+\s*(\((?:[^()]|\([^()]*\))*\)|\([^)]*\))?\s*:"
)
_GOOGLE_TYPED = re.compile(r"\s*\*{0,2}(\w+)\s*\(.*?\)\s*:")  # up to the type's `):`


def _read_google(text: str) -> Docstring:
    """docstring_parser's Google reader, on the text as Stoker's own reader saw it.

    Sessions store tool bytes, so a Google docstring must read as it always did. The
    former reader's tolerances are kept by moving lines before the library reads them: a
    section header may be indented (when a line above sits at the margin, such as a literal
    newline in a non-raw docstring), so it moves to the margin with all that follows; a
    line at the entries' indentation that does not start an entry (`name:` or
    `name (type):`) continues the entry above, where the library would refuse it or read
    "e.g. see: x" as an entry; lines before the first entry are skipped.
    """
    out: list[str] = []
    shift: int | None = None  # the first header's indentation, removed from there on
    header: int | None = None  # the current section's header and entry indentation
    entry: int | None = None
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip())
        if not line or (header is not None and indent > header):  # in a section, or blank
            if line and entry is None and not _GOOGLE_ENTRY.match(line):
                continue  # before the first entry: the former reader skipped it
            if line and entry is None:
                entry = indent
            elif line and indent == entry and not _GOOGLE_ENTRY.match(line):
                line = " " + line
        elif _GOOGLE_HEADER.fullmatch(line):
            shift = indent if shift is None else shift
            header, entry = indent, None
        else:
            header = None
        out.append(line[min(shift or 0, indent) :])
    return _GOOGLE.parse("\n".join(out))


@dataclass(frozen=True, slots=True)
class _Style:
    label: str
    parse: Callable[[str], Docstring]
    section: re.Pattern[str] | None  # a parameter section it may fail to read


# Tried in this order; the style that reads the most parameter entries wins, the first
# one on a tie (so a Google docstring reads as it always did).
_STYLES = (
    _Style("Google", _read_google, _GOOGLE_HEADER),
    _Style(
        "Sphinx", rest.parse, re.compile(r"^:(param|parameter|arg|argument|key|keyword)\b", re.M)
    ),
    _Style("NumPy", numpydoc.parse, None),  # its reader never refuses
    _Style("Epydoc", epydoc.parse, re.compile(r"^@(param|keyword)\b", re.M)),
)
# Where the summary paragraph ends, if before a blank line: at a Google parameter header
# (at any indentation, as Stoker's reader before docstring_parser had it), a Sphinx or
# Epydoc field, or a NumPy section title. Not where docstring_parser ends a description: it
# ends a Sphinx one at any line that starts with a colon, a role such as :func:`f` included.
_FIELDS = "param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|yields?"
_SUMMARY_END = re.compile(
    rf"{_GOOGLE_HEADER.pattern}|^[:@](?:{_FIELDS})\b[^:\n]*:|^\S.*\n-{{3,}}[ \t]*$", re.M
)
# Entry kinds that describe a call parameter (attributes and return values do not).
_PARAM_KEYS = frozenset(
    ("param", "parameter", "arg", "argument", "key", "keyword", "type", "other_param")
)


def parse_docstring(doc: str | None) -> ToolDocs:
    """The summary paragraph and the parameter entries of a docstring of any style.

    `doc` is clean already, as `inspect.getdoc` returns it. Google, Sphinx (reST), NumPy
    and Epydoc styles are read by `docstring_parser`; whitespace is normalized the same
    way for all: the lines of the summary and of each description are stripped and joined
    by single spaces, blank lines dropped.
    """
    text = "\n".join(line.rstrip() for line in (doc or "").splitlines())
    entries: dict[str, str] = {}
    unreadable: str | None = None
    for style in _STYLES:
        try:
            # docstring_parser dedents again (inspect.cleandoc); a leading newline makes that
            # a no-op, so a docstring that opens with `Args:` keeps its entries under it.
            parsed = style.parse("\n" + text)
        except Exception as exc:  # ParseError, and IndexError and the like on odd text
            if unreadable is None and style.section is not None and style.section.search(text):
                why = exc if isinstance(exc, ParseError) else f"{type(exc).__name__}: {exc}"
                unreadable = f"its {style.label}-style parameter section cannot be read ({why})"
            continue
        found = _entries(parsed, style.label)
        entries = found if len(found) > len(entries) else entries
    end = _SUMMARY_END.search(text)
    summary = _joined(text[: end.start() if end else None].split("\n\n", 1)[0])
    return ToolDocs(summary=summary, params=entries, unreadable=unreadable)


def _joined(text: str | None) -> str:
    return " ".join(s for line in (text or "").splitlines() if (s := line.strip()))


def _entries(parsed: Docstring, style: str) -> dict[str, str]:
    entries: dict[str, str] = {}
    for param in parsed.params:
        if param.args[0] not in _PARAM_KEYS:
            continue
        names, text = [param.arg_name], param.description or ""
        before = param.args[-1]
        if style == "Google" and "(" in before:
            # The library splits at the first colon, even inside a type such as
            # `(:obj:`str`)` or `(Literal["a:b"])`, and keeps `x ()` as a name: split
            # after the type instead.
            whole = f"{before}:{text}"
            if typed := _GOOGLE_TYPED.match(whole):
                names, text = [typed[1]], whole[typed.end() :]
        elif style == "NumPy":  # `x, y : int` describes two parameters
            names = param.arg_name.split(",")
        for raw in names:
            name = raw.strip().lstrip("*")  # `**kwargs: ...` describes kwargs
            entries[name] = " ".join(t for t in (entries.get(name, ""), _joined(text)) if t)
    return entries


def doc_problems(
    name: str, docs: ToolDocs, parameters: list[str], context: str | None
) -> list[str]:
    """What the docstring fails to tell the model about the tool's `parameters`.

    One message per parameter: an entry for a name the function does not have (a typo);
    a parameter without a description when the docstring describes others or has a
    parameter section it cannot read. A docstring without parameter entries (a summary
    only) is a choice, not a mistake; the context parameter needs no description.
    """
    problems = [
        f"tool {name}: the docstring describes parameter {entry!r}, which the function "
        f"does not have (its parameters: {', '.join(parameters) or 'none'}); fix the name"
        for entry in docs.params
        if entry not in parameters and entry != context
    ]
    for param in parameters:
        if docs.params.get(param):
            continue
        if docs.unreadable is not None:
            problems.append(
                f"tool {name}: parameter {param!r} has no description: the docstring's "
                f"{docs.unreadable.removeprefix('its ')}"
            )
        elif docs.params:
            described = ", ".join(repr(p) for p in docs.params if docs.params[p])
            problems.append(
                f"tool {name}: parameter {param!r} has no description in the docstring "
                f"(it describes {described or 'none'}); the model sees only its name and type"
            )
    return problems


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
