"""Deterministic JSON values valid against a JSON Schema, for the simulator's forced tool
calls and structured outputs.

The generator proposes and a checker decides. The generator reads a schema as pydantic,
OpenAI strict mode and MCP tools write them (`$ref` and `allOf` merged in, `anyOf` and
`oneOf` branches tried in turn); each proposal is checked against the schema as written,
by jsonschema's Draft 2020-12 rules, and a rejected one makes way for the next. So a
keyword the generator only half models (`not`, `oneOf`'s "exactly one", `if`, a lossy
`allOf` merge) can cost tries, never validity.

Choices come from a hash of `seed` and the place in the schema, never from a global RNG
or the clock: the same schema and seed give the same value in every process.

Decisions:
- Optional properties are filled, each one that can be generated, so a value looks like
  a full answer; an object the checker rejects is tried again with required ones only.
- `anyOf`/`oneOf` branches go in schema order: pydantic puts the real type before its
  fallbacks (`number` before `string` for a Decimal).
- Past `SOFT_DEPTH` steps, or once a `$ref` recurs more than `REF_REPEATS` times on a
  path, values are minimal: required properties only, the fewest items, `null` and
  branches without a `$ref` first. So a tree or a linked list ends; a recursion with no
  way out meets `MAX_DEPTH` and is refused.
- Strings matching a `pattern`, and values of a `format` (`2024-03-15T09:30:00Z`, a
  version-4 UUID, ...), come from walking a regular expression (`_regex_values`);
  unknown formats are ignored, and a format that cannot meet the lengths gives way to
  a plain string, as JSON Schema makes formats annotations.
- Words and numbers of `hint` (a quoted phrase first) are used where they fit; so are
  the constraints Anthropic's SDK moves into a description (`{minimum: 1}`), which its
  parse helper still checks.

Everything is bounded (depth, items, string length, total steps), so hostile input ends
in `UnsatisfiableSchema`, never a hang or a RecursionError.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar
from urllib.parse import unquote

from stoker.errors import InvalidRequest
from stoker.providers.sim._regex_values import FORMATS, LIMIT, searches, string_matching

MAX_DEPTH = 64  # schema steps on one path; deeper is refused, not recursed into
SOFT_DEPTH = 12  # from here on, only what is required
REF_REPEATS = 2  # a $ref recurring more often on one path makes values minimal
MAX_ITEMS = 1_000  # minItems / minProperties above this are refused
MAX_LENGTH = LIMIT  # minLength above this is refused (the regex walk's limit too)
MAX_STEPS = 100_000  # generation and checking steps for one value

_T = TypeVar("_T")
_MISSING: Any = object()
_VOCAB = ("amber", "cedar", "harbor", "maple", "river", "stone", "willow", "meadow")
_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
_FAMILIES = (
    ("object", {"properties", "required", "additionalProperties", "minProperties"}),
    ("array", {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"}),
    ("string", {"pattern", "minLength", "maxLength", "format"}),
    ("number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
)


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


class _OutOfSteps(Exception):
    """The step budget ran out: ends the whole search, not just one alternative."""


def value_for(schema: Mapping[str, Any] | bool, *, seed: str = "", hint: str = "") -> Any:
    """A JSON value valid against `schema`, the same for the same schema and seed.

    `seed` varies the value (a hash of the conversation, say); `hint` is text whose words
    and numbers are used for strings and numbers when they fit. Raises
    `UnsatisfiableSchema` when no value can be generated.
    """
    generator = _Generator(schema, seed=seed, hint=hint)
    try:
        return generator.value(schema, "#", 0, (), 0)
    except _OutOfSteps:
        reason = f"no value was found within {MAX_STEPS} steps (too large or too branchy)"
        raise UnsatisfiableSchema(generator.where, reason) from None
    except RecursionError:
        raise UnsatisfiableSchema("#", "it nests too deeply to generate a value") from None


class _Generator:
    """One `value_for` call: the root (for `$ref`), the seed, the hint and the budget."""

    def __init__(self, root: Any, *, seed: str, hint: str) -> None:
        self.root, self.seed, self.steps, self.where = root, seed, 0, "#"
        quoted = re.findall(r"[\"'`]([^\"'`]+)[\"'`]", hint)
        self.words = quoted or [w for w in re.findall(r"[A-Za-z][\w.-]*", hint) if len(w) > 2]
        self.numbers = [Fraction(n) for n in re.findall(r"-?\d+(?:\.\d+)?", hint)[:8]]

    def tick(self, where: str) -> None:
        self.steps, self.where = self.steps + 1, where
        if self.steps > MAX_STEPS:
            raise _OutOfSteps

    def pick(self, where: str, depth: int) -> int:
        text = f"{self.seed}\x00{where}\x00{depth}".encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")

    def value(
        self, schema: Any, ptr: str, depth: int, refs: tuple[str, ...], nth: int,
        base: Mapping[str, Any] | None = None, must: Any = True,
    ) -> Any:  # fmt: skip
        """A value for `schema` at `ptr`; `nth` > 0 asks for another one (a sibling in a
        unique array). `base` is merged in to guide generation; `must` is one more schema
        the value is checked against."""
        self.tick(ptr)
        if depth > MAX_DEPTH:
            raise UnsatisfiableSchema(ptr, f"it nests more than {MAX_DEPTH} levels deep")
        flat, refs = self.flatten(schema, ptr, refs)
        flat = _merge(base or {}, flat)
        flat = {**_described(flat.get("description")), **flat}
        minimal = depth >= SOFT_DEPTH or max(Counter(refs).values(), default=0) > REF_REPEATS
        errors: list[UnsatisfiableSchema] = []
        for candidate in self.candidates(flat, ptr, depth, refs, nth, minimal, errors):
            if self.ok(schema, candidate, ptr) and self.ok(must, candidate, ptr):
                return candidate
        raise errors[0] if errors else UnsatisfiableSchema(ptr, "no value tried fits it all")

    def flatten(self, schema: Any, ptr: str, refs: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        """One dict with the schema's `$ref`s and `allOf`s merged in, and the refs on the
        path. A ref met twice at one level adds nothing new, so `{"$ref": "#"}` ends."""
        out: dict[str, Any] = {}
        todo, seen = deque([(schema, ptr)]), set()
        while todo:
            part, where = todo.popleft()
            self.tick(where)
            if part is True:
                continue
            if not isinstance(part, Mapping):
                reason = "it is `false`" if part is False else "it is no object or boolean"
                raise UnsatisfiableSchema(where, reason)
            ref = part.get("$ref")
            if isinstance(ref, str) and ref not in seen:
                seen.add(ref)
                refs += (ref,)
                target = _resolve(self.root, ref)
                if target is _MISSING:
                    raise UnsatisfiableSchema(f"{where}/$ref", f"cannot follow $ref {ref!r}")
                todo.append((target, ref))
            todo.extend((sub, f"{where}/allOf/{i}") for i, sub in enumerate(_list(part, "allOf")))
            out = _merge(out, {k: v for k, v in part.items() if k not in ("$ref", "allOf")})
        return out, refs

    def candidates(
        self, s: dict[str, Any], ptr: str, depth: int, refs: tuple[str, ...], nth: int,
        minimal: bool, errors: list[UnsatisfiableSchema],
    ) -> Iterator[Any]:  # fmt: skip
        """Proposals in order of preference; a generation that fails records why."""
        if "const" in s:
            yield s["const"]
            return
        if isinstance(s.get("enum"), list):
            options, start = s["enum"], self.pick(ptr, depth) + nth
            yield from (options[(start + i) % len(options)] for i in range(min(len(options), 64)))
            errors.append(UnsatisfiableSchema(ptr, "no enum value fits its other keywords"))
            return
        for key in ("anyOf", "oneOf"):
            branches = _list(s, key)
            if key not in s:
                continue
            rest = {k: v for k, v in s.items() if k != key}
            for i in _branch_order(branches, minimal):
                others = branches[:i] + branches[i + 1 :]
                must = {"not": {"anyOf": others}} if key == "oneOf" and others else True
                where = f"{ptr}/{key}/{i}"
                try:
                    yield self.value(branches[i], where, depth + 1, refs, nth, rest, must)
                except UnsatisfiableSchema as error:
                    errors.append(error.with_traceback(None))  # no frame cycles to collect
            return
        examples = _list(s, "examples")
        if examples:
            yield examples[nth % len(examples)]
        for kind in _types(s, minimal, ptr):
            for attempt in range(2 if minimal else 3):
                try:
                    yield self.typed(
                        kind, s, ptr, depth, refs, nth + attempt, minimal or attempt > 1
                    )
                except UnsatisfiableSchema as error:
                    # not a rejection: another nth would fail alike
                    errors.append(error.with_traceback(None))
                    break
        if "default" in s:
            yield s["default"]

    def typed(
        self, kind: str, s: dict[str, Any], ptr: str, depth: int, refs: tuple[str, ...],
        nth: int, minimal: bool,
    ) -> Any:  # fmt: skip
        if kind == "null":
            return None
        if kind == "boolean":
            return (self.pick(ptr, depth) + nth) % 2 == 0
        if kind in ("integer", "number"):
            return self.number(s, ptr, depth, nth, kind == "integer")
        if kind == "string":
            return self.string(s, ptr, depth, refs, nth)
        if kind == "array":
            return self.array(s, ptr, depth, refs, nth, minimal)
        if kind == "object":
            return self.object(s, ptr, depth, refs, nth, minimal)
        raise UnsatisfiableSchema(f"{ptr}/type", f"unknown type {kind!r}")

    def number(self, s: dict[str, Any], ptr: str, depth: int, nth: int, integer: bool) -> Any:
        """A hint's number if it fits, else one near a seeded base: whole numbers first,
        then multiples of `multipleOf`, then any point inside the bounds."""
        lo, lo_open = _bound(s, "minimum", "exclusiveMinimum", max)
        hi, hi_open = _bound(s, "maximum", "exclusiveMaximum", min)
        mult = _frac(s.get("multipleOf"))
        mult = mult if mult is not None and mult > 0 else None
        steps = [Fraction(mult.numerator if mult else 1)] + ([] if integer else [mult])
        hints = [_json_number(n) for n in self.numbers[nth:] if n.denominator == 1 or not integer]
        for number in hints:
            if _shape_ok({**s, "type": "number"}, number):
                return number
        base = self.pick(ptr, depth) % 100
        for step in steps:
            for offset in range(8):
                found = _in_range(lo, lo_open, hi, hi_open, step, base, nth + offset)
                if found is None:
                    break
                if _shape_ok(s, number := _json_number(found)):
                    return number
        kind = "integer" if integer else "number"
        raise UnsatisfiableSchema(ptr, f"found no {kind} within its bounds and multipleOf")

    def string(
        self, s: Mapping[str, Any], ptr: str, depth: int, refs: tuple[str, ...], nth: int
    ) -> str:
        """JSON text for a JSON `contentMediaType`, else a format's value, else a string
        the pattern matches, else a word (from the hint if any) stretched or cut to fit."""
        lo, hi = _count(s.get("minLength"), 0), _count(s.get("maxLength"), None)
        if lo > MAX_LENGTH:
            raise UnsatisfiableSchema(f"{ptr}/minLength", f"minLength {lo} is above {MAX_LENGTH}")
        if hi is not None and hi < lo:
            raise UnsatisfiableSchema(ptr, f"minLength {lo} is above maxLength {hi}")
        h, pattern, fmt = self.pick(ptr, depth) + nth, s.get("pattern"), s.get("format")
        options: list[str | None] = []
        if s.get("contentMediaType") == "application/json" and "contentSchema" in s:
            inner = self.value(s["contentSchema"], f"{ptr}/contentSchema", depth + 1, refs, nth)
            options.append(json.dumps(inner))
        seed = f"{self.seed}\x00{ptr}\x00{depth}\x00{nth}"
        for source in (FORMATS.get(fmt) if isinstance(fmt, str) else None, pattern):
            try:
                if isinstance(source, str):
                    options.append(string_matching(source, seed=seed, min_len=lo, max_len=hi))
            except re.error as error:
                reason = f"pattern {pattern!r} is no Python regular expression ({error})"
                raise UnsatisfiableSchema(f"{ptr}/pattern", reason) from None
        if not isinstance(pattern, str):
            options.append(_sized(self.words or _VOCAB, h, lo, hi, nth))
        for text in options:
            if text is not None and _shape_ok({**s, "type": "string"}, text):
                return text
        reason = f"found no string matching {pattern!r} of length {lo} to {hi}"
        raise UnsatisfiableSchema(f"{ptr}/pattern", reason)

    def array(
        self, s: dict[str, Any], ptr: str, depth: int, refs: tuple[str, ...], nth: int,
        minimal: bool,
    ) -> list[Any]:  # fmt: skip
        """Every `prefixItems` entry and one more item (only `minItems` when minimal);
        with `uniqueItems`, each item asks for another `nth` until it is new."""
        prefix, extra, contains = _list(s, "prefixItems"), s.get("items", True), s.get("contains")
        lo, hi = _count(s.get("minItems"), 0), _count(s.get("maxItems"), None)
        if lo > MAX_ITEMS:
            raise UnsatisfiableSchema(f"{ptr}/minItems", f"minItems {lo} is above {MAX_ITEMS}")
        if extra is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and hi < lo:
            raise UnsatisfiableSchema(ptr, f"at least {lo} items are needed, at most {hi} fit")
        need = 0 if contains in (None, True) else _count(s.get("minContains"), 1)
        want = max(lo, need) if minimal else max(lo, need, len(prefix) or 1)
        want = want if hi is None else min(want, hi)
        items: list[Any] = []
        seen: set[Any] = set()
        for i in range(want):
            sub, where = (prefix[i], f"/prefixItems/{i}") if i < len(prefix) else (extra, "/items")
            base = contains if i < need and isinstance(contains, Mapping) else None
            unique = s.get("uniqueItems") is True
            tries = range(nth + i, nth + i + (8 * want if unique else 1), want)
            try:
                made = (self.value(sub, ptr + where, depth + 1, refs, k, base) for k in tries)
                item = next((x for x in made if not unique or _key(x) not in seen), _MISSING)
            except UnsatisfiableSchema:
                if i < max(lo, need):
                    raise
                break  # items past minItems are optional
            if item is _MISSING:
                if i < max(lo, need):
                    raise UnsatisfiableSchema(ptr, f"found no {lo} distinct items for uniqueItems")
                break
            seen.add(_key(item))
            items.append(item)
        return items

    def object(
        self, s: dict[str, Any], ptr: str, depth: int, refs: tuple[str, ...], nth: int,
        minimal: bool,
    ) -> dict[str, Any]:  # fmt: skip
        """Required properties, then optional ones (unless minimal), then what
        `dependentRequired` and `minProperties` ask for."""
        required = [r for r in dict.fromkeys(_list(s, "required")) if isinstance(r, str)]
        lo, hi = _count(s.get("minProperties"), 0), _count(s.get("maxProperties"), None)
        if lo > MAX_ITEMS:
            raise UnsatisfiableSchema(f"{ptr}/minProperties", f"minProperties {lo} is too many")
        if hi is not None and max(lo, len(required)) > hi:
            raise UnsatisfiableSchema(ptr, f"maxProperties {hi} leaves too little room")
        out: dict[str, Any] = {}

        def add(name: str, optional: bool) -> None:
            sub, where, base = _property_schema(s, name, ptr)
            try:
                out[name] = self.value(sub, where, depth + 1, refs, nth, base)
            except UnsatisfiableSchema:
                if not optional:
                    raise

        for name in required:
            add(name, optional=False)
        for name in _map(s, "properties"):
            room = hi is None or len(out) < hi
            if name not in out and room and (not minimal or len(out) < lo):
                add(name, optional=True)
        deps = _map(s, "dependentRequired")
        for _ in range(len(deps)):
            for name in [d for k in list(out) for d in _list(deps, k) if d not in out]:
                add(name, optional=False)
        names = dict(_map(s, "propertyNames"))
        patterns = _map(s, "patternProperties")
        if s.get("additionalProperties") is False and patterns and "pattern" not in names:
            names["pattern"] = next(iter(patterns))
        for i in range(4 * lo + 8):
            if len(out) >= lo:
                break
            name = self.string(names, f"{ptr}/propertyNames", depth + 1, refs, nth + i)
            if name not in out:
                add(name, optional=True)
        return out

    def ok(self, schema: Any, value: Any, ptr: str) -> bool:
        return _Checker(self.root, self.tick, ptr).ok(schema, value, 0, frozenset())


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


def _types(s: Mapping[str, Any], minimal: bool, ptr: str) -> list[str]:
    """Types to try: the declared ones, else those the keywords suggest and then the
    rest; `null` first in minimal values, last otherwise."""
    if "type" in s:
        kinds = [k for k in dict.fromkeys(_as_types(s["type"])) if isinstance(k, str)]
        if not kinds:
            raise UnsatisfiableSchema(f"{ptr}/type", "no type is left to allow")
    else:
        kinds = [name for name, keys in _FAMILIES if keys & s.keys()]
        kinds += [t for t in _TYPES if t not in kinds]
    return sorted(kinds, key=lambda k: (k == "null") != minimal)


def _branch_order(branches: list[Any], minimal: bool) -> list[int]:
    """Schema order; in minimal values `null` first and branches without a `$ref` next."""

    def rank(i: int) -> int:
        b = branches[i]
        if not isinstance(b, Mapping) or b.get("type") == "null":
            return 0
        return 2 if any("$ref" in x for x in [b, *b.values()] if isinstance(x, Mapping)) else 1

    order = list(range(len(branches)))
    return sorted(order, key=rank) if minimal else order


def _property_schema(s: Mapping[str, Any], name: str, ptr: str) -> tuple[Any, str, Any]:
    """The schema a property's value must fit, its pointer, and a matching
    `patternProperties` schema to merge in."""
    props, escaped = _map(s, "properties"), name.replace("~", "~0").replace("/", "~1")
    matched = [(p, x) for p, x in _map(s, "patternProperties").items() if _searches(p, name)]
    if name in props:
        base = next((x for _, x in matched if isinstance(x, Mapping)), None)
        return props[name], f"{ptr}/properties/{escaped}", base
    if matched:
        pattern = matched[0][0].replace("~", "~0").replace("/", "~1")
        return matched[0][1], f"{ptr}/patternProperties/{pattern}", None
    return s.get("additionalProperties", True), f"{ptr}/additionalProperties", None


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


def _bound(s: Mapping[str, Any], key: str, open_key: str, tighter: Callable[..., Any]) -> Any:
    """The tighter of `minimum` and `exclusiveMinimum` (or the maxima) as an exact
    Fraction, and whether it is exclusive (draft 4's boolean form included)."""
    closed, opened = _frac(s.get(key)), s.get(open_key)
    if opened is True:
        return closed, closed is not None
    open_value = _frac(opened)
    if open_value is not None and (closed is None or tighter(closed, open_value) == open_value):
        return open_value, True
    return closed, False


def _frac(x: Any) -> Fraction | None:
    """A schema number as written (0.1 is 1/10, not the nearest binary float)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    if isinstance(x, float):
        return Fraction(repr(x)) if math.isfinite(x) else None
    return Fraction(x)


def _in_range(
    lo: Fraction | None, lo_open: bool, hi: Fraction | None, hi_open: bool,
    step: Fraction | None, base: int, nth: int,
) -> Fraction | None:  # fmt: skip
    """The `nth` multiple of `step` (any number if None) within the bounds, near `base`."""
    if step is None:
        if lo is None or hi is None:
            return hi - 1 - nth if hi is not None else (lo or 0) + Fraction(1, 2) + base + nth
        if lo > hi or (lo == hi and (lo_open or hi_open)):
            return None
        return lo + (hi - lo) * Fraction(nth + 1, nth + 2)
    kmin = None if lo is None else math.ceil(lo / step) + (lo_open and (lo / step).denominator == 1)
    kmax = (
        None if hi is None else math.floor(hi / step) - (hi_open and (hi / step).denominator == 1)
    )
    if kmin is not None and kmax is not None:
        span = kmax - kmin + 1
        return None if span <= 0 else step * (kmin + (base % min(span, 100) + nth) % span)
    return step * (kmax - base - nth) if kmax is not None else step * ((kmin or 0) + base + nth)


def _json_number(x: Fraction) -> int | float:
    if x.denominator == 1:
        return int(x)
    try:
        return float(x)
    except OverflowError:
        return int(x)


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


def _sized(words: Sequence[str], h: int, lo: int, hi: int | None, nth: int) -> str:
    """A word stretched or cut to fit. Siblings (`nth`) take the next words, then a
    leading tag that keeps them apart even when cut short."""
    tag, rounds = "", (h % len(words) + nth) // len(words)
    while rounds:
        rounds, digit = divmod(rounds, 36)
        tag = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + tag
    word = words[(h + nth) % len(words)]
    text = tag + word
    while len(text) < lo:
        text += "-" + word
    return text if hi is None else text[:hi]
