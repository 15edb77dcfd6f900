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

import hashlib
import json
import math
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

from stoker.providers.sim._regex_values import FORMATS, LIMIT, string_matching
from stoker.providers.sim._schema_check import (
    _MISSING,
    _TYPES,
    MAX_DEPTH,
    UnsatisfiableSchema,
    _as_types,
    _Checker,
    _count,
    _described,
    _key,
    _list,
    _map,
    _merge,
    _resolve,
    _searches,
    _shape_ok,
)

SOFT_DEPTH = 12  # from here on, only what is required
REF_REPEATS = 2  # a $ref recurring more often on one path makes values minimal
MAX_ITEMS = 1_000  # minItems / minProperties above this are refused
MAX_LENGTH = LIMIT  # minLength above this is refused (the regex walk's limit too)
__all__ = ["UnsatisfiableSchema", "value_for"]

MAX_STEPS = 100_000  # generation and checking steps for one value

_T = TypeVar("_T")
_VOCAB = ("amber", "cedar", "harbor", "maple", "river", "stone", "willow", "meadow")
_FAMILIES = (
    ("object", {"properties", "required", "additionalProperties", "minProperties"}),
    ("array", {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"}),
    ("string", {"pattern", "minLength", "maxLength", "format"}),
    ("number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
)


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
        elif nth:  # another item of a uniqueItems array: a pattern is searched, not anchored
            stem = f"{_VOCAB[h % len(_VOCAB)]}{nth}"
            found = [t for t in options if t is not None]
            variants: list[str | None] = [v for t in found for v in (stem + t, t + stem)]
            options = variants + options
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
