"""Reading a JSON schema as written, and whether a value satisfies it: the check behind
every value `schema_values` generates, and the error for a schema that admits none.

By jsonschema's Draft 2020-12 rules for the keywords the generator knows (others are
ignored, as validators ignore unknown keywords). Written here rather than delegated to
`jsonschema` because it must end on hostile schemas: a `$ref` met again at one place in
the value adds nothing new, so reference cycles end, and every step counts against the
generator's budget.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar
from urllib.parse import unquote

from stoker.errors import InvalidRequest
from stoker.providers.sim._regex_values import searches

MAX_DEPTH = 64  # schema steps on one path; deeper is refused, not recursed into

_T = TypeVar("_T")
_MISSING: Any = object()
_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")


class UnsatisfiableSchema(InvalidRequest):
    """No value could be generated for a schema: it admits none (`false`, bounds that
    cross, a required property that is forbidden) or none within this generator's bounds
    (depth, size, steps). `pointer` is the JSON pointer of the offending part. The
    simulator answers it as the provider answers a schema it refuses: a 400."""

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(
            f"no JSON value satisfies the schema at {pointer}: {reason}. Fix or relax that "
            "part of the schema; the simulator answers only with values valid against it.",
            provider="sim",
        )
        self.pointer = pointer
        self.reason = reason


class _Checker:
    """Whether a value satisfies a schema as written, by jsonschema's Draft 2020-12 rules
    for the keywords above (others are ignored, as validators do). A `$ref` met again at
    one place in the value adds nothing new, so reference cycles end. It shares the
    generator's step budget; `ptr` is where the generator asked, for errors."""

    def __init__(self, root: Any, tick: Callable[[str], None], ptr: str) -> None:
        self.root, self.tick, self.ptr = root, tick, ptr

    def ok(self, s: Any, v: Any, depth: int, seen: frozenset[str]) -> bool:
        if not isinstance(s, Mapping):
            return s is not False
        self.tick(self.ptr)
        if depth > MAX_DEPTH:
            raise UnsatisfiableSchema(self.ptr, f"it nests more than {MAX_DEPTH} levels deep")
        ref = s.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            target = _resolve(self.root, ref)
            if target is _MISSING or not self.ok(target, v, depth + 1, seen | {ref}):
                return False
        if not _shape_ok(s, v):
            return False

        def same(sub: Any) -> bool:
            return self.ok(sub, v, depth + 1, seen)

        def each(sub: Any, items: Any) -> bool:
            return all(self.ok(sub, item, depth + 1, frozenset()) for item in items)

        if not all(map(same, _list(s, "allOf"))) or ("not" in s and same(s["not"])):
            return False
        if "anyOf" in s and not any(map(same, _list(s, "anyOf"))):
            return False
        if "oneOf" in s and sum(map(same, _list(s, "oneOf"))) != 1:
            return False
        branch = ("then" if same(s["if"]) else "else") if "if" in s else None
        if branch in s and not same(s[branch]):
            return False
        if isinstance(v, list):
            prefix = _list(s, "prefixItems")
            if not all(each(x, [item]) for x, item in zip(prefix, v, strict=False)):
                return False
            if not each(s.get("items", True), v[len(prefix) :]):
                return False
            if "contains" in s:
                hits = sum(each(s["contains"], [item]) for item in v)
                most = _count(s.get("maxContains"), hits)
                return _count(s.get("minContains"), 1) <= hits <= most
        if isinstance(v, dict):
            props, patterns = _map(s, "properties"), _map(s, "patternProperties")
            for name, item in v.items():
                matched = [x for p, x in patterns.items() if _searches(p, name)]
                matched += [props[name]] if name in props else []
                schemas = matched or [s.get("additionalProperties", True)]
                if not each(s.get("propertyNames", True), [name]) or not all(
                    each(x, [item]) for x in schemas
                ):
                    return False
            return all(same(x) for k, x in _map(s, "dependentSchemas").items() if k in v)
        return True


def _shape_ok(s: Mapping[str, Any], v: Any) -> bool:
    """The keywords that need no subschema: type, enum, const, bounds, counts, pattern."""
    kinds = s.get("type")
    if kinds is not None and not any(_is(kind, v) for kind in _as_types(kinds)):
        return False
    if "const" in s and _key(s["const"]) != _key(v):
        return False
    if isinstance(s.get("enum"), list) and _key(v) not in {_key(x) for x in s["enum"]}:
        return False
    if _is("number", v):
        bounds = [s.get(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")]
        lo, hi, lo_open, hi_open = (b if _is("number", b) else None for b in bounds)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            return False
        if (lo_open is not None and v <= lo_open) or (hi_open is not None and v >= hi_open):
            return False
        return _multiple(v, s.get("multipleOf"))
    sized = {str: "Length", list: "Items", dict: "Properties"}
    noun = next((noun for kind, noun in sized.items() if isinstance(v, kind)), None)
    if noun and not _count(s.get(f"min{noun}"), 0) <= len(v) <= _count(s.get(f"max{noun}"), len(v)):
        return False
    if isinstance(v, str):
        return _searches(s.get("pattern"), v)
    if isinstance(v, list) and s.get("uniqueItems") is True:
        return len({_key(x) for x in v}) == len(v)
    if isinstance(v, dict):
        deps = _map(s, "dependentRequired")
        wanted = _list(s, "required") + [d for k in v for d in _list(deps, k)]
        return all(name in v for name in wanted)
    return True


def _multiple(v: Any, m: Any) -> bool:
    """jsonschema's multipleOf, float quirks included (0.3 is no multiple of 0.1)."""
    if not _is("number", m) or m <= 0:
        return True
    try:
        if not isinstance(m, float):
            return not v % m
        try:
            quotient = v / m
            return bool(int(quotient) == quotient)
        except (OverflowError, ValueError):
            return (Fraction(v) / Fraction(m)).denominator == 1
    except (OverflowError, ValueError):
        return False


def _is(kind: Any, v: Any) -> bool:
    if kind in ("integer", "number") and isinstance(v, int | float) and not isinstance(v, bool):
        return kind == "number" or isinstance(v, int) or v.is_integer()
    plain = {"null": type(None), "boolean": bool, "string": str, "array": list, "object": dict}
    return kind in plain and isinstance(v, plain[kind])


def _key(v: Any) -> Any:
    """A hashable stand-in for JSON equality: 1 equals 1.0, True does not equal 1."""
    if isinstance(v, bool) or v is None:
        return (repr(v),)
    if isinstance(v, int | float | str):
        return (type(v) is str, v)
    if isinstance(v, list | tuple):
        return ("a", tuple(map(_key, v)))
    if isinstance(v, Mapping):
        return ("o", frozenset((k, _key(x)) for k, x in v.items()))
    return ("?", repr(v))


def _resolve(root: Any, ref: str) -> Any:
    """The target of a local `$ref` (`#` or a JSON pointer `#/...`), else _MISSING."""
    node = root if ref == "#" or ref.startswith("#/") else _MISSING
    for raw in ref[2:].split("/") if ref.startswith("#/") else []:
        token = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def _count(x: Any, default: _T) -> int | _T:
    """A non-negative count keyword (minItems, maxLength, ...), else `default`."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
        return default
    return int(x)


def _searches(pattern: Any, text: str) -> bool:
    return not isinstance(pattern, str) or searches(pattern, text)


def _list(s: Any, key: str) -> list[Any]:
    x = s.get(key) if isinstance(s, Mapping) else None
    return x if isinstance(x, list) else []


def _map(s: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    x = s.get(key)
    return x if isinstance(x, Mapping) else {}


_LARGER = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
_SMALLER = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """`a` and `b` as one schema, to guide generation. Keywords that do not combine keep
    `a`'s value: the checker still reads both schemas as written."""
    out = dict(a)
    for key, new in b.items():
        old = out.setdefault(key, new)
        if old is new:
            continue
        if key in _LARGER | _SMALLER and _is("number", old) and _is("number", new):
            out[key] = max(old, new) if key in _LARGER else min(old, new)
        elif key == "required" and isinstance(old, list) and isinstance(new, list):
            out[key] = list(dict.fromkeys([*old, *new]))
        elif key == "type":
            left, right = _as_types(old), _as_types(new)
            both = [t for t in left if t in right or (t == "integer" and "number" in right)]
            out[key] = both + (["integer"] if "integer" in right and "number" in left else [])
        elif key in ("properties", "patternProperties") and isinstance(old, Mapping):
            extra = {n: {"allOf": [old[n], x]} if n in old else x for n, x in _map(b, key).items()}
            out[key] = {**old, **extra}
        elif key in ("items", "additionalProperties", "contains", "propertyNames"):
            out[key] = {"allOf": [old, new]}
        elif key == "enum" and isinstance(old, list) and isinstance(new, list):
            keep = {_key(x) for x in new}
            out[key] = [x for x in old if _key(x) in keep]
    return out


_DESCRIBED = {*_LARGER, *_SMALLER, "multipleOf", "pattern", "format", "uniqueItems"}
_DESCRIBED |= {"prefixItems", "contentMediaType", "contentSchema"}


def _described(description: Any) -> dict[str, Any]:
    """Constraints that Anthropic's SDK (`transform_schema`) moved into a description, as
    `{minimum: 1, pattern: ^a$}`, because its API does not take them; its parse helper
    still checks them, so they guide generation (the check reads the schema as sent)."""
    text = description if isinstance(description, str) and len(description) < 10_000 else ""
    found = re.search(r"(?:\A|\n\n)\{([A-Za-z]\w*: .*)\}\Z", text, re.DOTALL)
    out: dict[str, Any] = {}
    for part in re.split(r", (?=[A-Za-z]\w*: )", found.group(1)) if found else []:
        key, _, raw = part.partition(": ")
        try:
            if key in _DESCRIBED:
                literal = key not in ("pattern", "format", "contentMediaType")
                out[key] = ast.literal_eval(raw) if literal else raw
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


def _as_types(x: Any) -> list[Any]:
    return [x] if isinstance(x, str) else list(x) if isinstance(x, list) else list(_TYPES)
