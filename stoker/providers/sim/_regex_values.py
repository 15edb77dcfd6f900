"""Strings that a regular expression matches, found by walking its parse tree.

JSON Schema's `pattern` is searched for with Python's `re` (as jsonschema does), so a
string built to match the whole pattern also satisfies it. The walk emits one character
per literal or class and picks branches and repeat counts with a seeded
`random.Random`, so the same pattern and seed give the same string in every process.
Anchors, word boundaries, lookarounds and possessive repeats are not modelled: every
candidate is checked with `re.search`, and a pattern the walk gets wrong costs a few
tries, never a loop.

A `format` is a named pattern here (`FORMATS`), so a format's value is varied by the
seed and fitted to `minLength`/`maxLength` the same way; the patterns cover JSON
Schema's formats and the ones pydantic writes (`ipvanyaddress`, `uuid4`, ...), with
values pydantic accepts (dates on or before the 28th, times with a `Z`).

`re._parser` is private, but it is the parser `re` itself uses (stable since 3.11;
`sre_parse`, its old public name, warns on import).

Why not a library (issue 38): hypothesis's `from_regex` draws through a test engine,
is not a seeded function one can call at run time, and is a large dependency the core
does not carry (it is the `bench` extra); `rstr`'s `xeger` takes a seeded `Random` but
builds a string with no length in view, so `minLength`/`maxLength` and the formats
would still need this walk, for one more distribution in every core install.
"""

from __future__ import annotations

import random
import re
import re._constants as _c
import re._parser as _parser
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

_NICE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_OTHER = " _-.@:/!#$%&*+,;<=>?^~|'\"()[]{}\\`\t\n\u00e9\u00df\u03b1\u4e2d\u2014"
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT)
_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    _c.CATEGORY_DIGIT: str.isdecimal,
    _c.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdecimal(),
    _c.CATEGORY_SPACE: str.isspace,
    _c.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
    _c.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
    _c.CATEGORY_NOT_WORD: lambda ch: not (ch.isalnum() or ch == "_"),
    _c.CATEGORY_LINEBREAK: lambda ch: ch == "\n",
    _c.CATEGORY_NOT_LINEBREAK: lambda ch: ch != "\n",
}
_IP4 = r"192\.0\.2\.([1-9]|[1-9]\d|1\d\d|2[0-4]\d)"
_IP6 = r"2001:db8::[1-9a-f][0-9a-f]{0,3}"
_DATE = r"2024-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\dZ"
_HOST = r"[a-z]{3,8}\.example\.com"
_URL = rf"https://{_HOST}/[a-z]{{3,8}}"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-%s[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "date-time": f"{_DATE}T{_TIME}", "date": _DATE, "time": _TIME,
        "duration": r"P[1-9]DT([1-9]|1\d|2[0-3])H",
        "email": rf"[a-z]{{3,8}}@{_HOST}", "idn-email": rf"[a-z]{{3,8}}@{_HOST}",
        "hostname": _HOST, "idn-hostname": _HOST,
        "uri": _URL, "iri": _URL, "uri-reference": _URL, "iri-reference": _URL,
        "ipv4": _IP4, "ipvanyaddress": _IP4, "ipv6": _IP6,
        "ipv4interface": f"{_IP4}/24", "ipvanyinterface": f"{_IP4}/24",
        "ipv6interface": f"{_IP6}/64", "ipv4network": r"192\.0\.2\.0/24",
        "ipvanynetwork": r"192\.0\.2\.0/24", "ipv6network": "2001:db8::/32",
        "json-pointer": "(/[a-z]{1,8}){1,3}", "relative-json-pointer": "[0-9](/[a-z]{1,8}){0,2}",
        "regex": r"\^\[a-z\]\+\$", "base64": "([A-Za-z0-9+/]{4}){2,4}",
        "base64url": "([A-Za-z0-9_-]{4}){2,4}",
        **{f"uuid{v}": _UUID % v for v in "12345678"}, "uuid": _UUID % 4,
    }
)  # fmt: skip
_STARTS = (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING)
_ENDS = (_c.AT_END, _c.AT_END_STRING)
LIMIT = 10_000  # characters in a generated string; rounds of a repeat in a pattern
# (extra repeats beyond the minimum, or None to aim at a length) for successive tries
_PLAN = (2, None, 0, 1, None, 4, 3, None, 8, 0, None, 1)


class _Miss(Exception):
    """This walk cannot finish (too long, or a character class nothing satisfies)."""


def string_matching(
    pattern: str, *, seed: str, min_len: int = 0, max_len: int | None = None
) -> str | None:
    """A string `re.search(pattern, ...)` finds a match in, of a length within bounds.

    None when none of the tries fits (the caller says why); `re.error` for a pattern
    Python cannot compile.
    """
    shape = _shape(pattern)
    top = LIMIT if max_len is None else min(max_len, LIMIT)
    if shape is None or shape[0].getwidth()[0] > top:
        return None
    tree, before, after = shape
    for attempt, extra in enumerate(_PLAN):
        target = None if extra is None else min(min_len + attempt // 3, top)
        walk = _Walk(random.Random(f"{seed}\x00{attempt}"), extra or 0, target)
        try:
            walk.emit(tree, 0)
        except _Miss:
            continue
        text = "".join(walk.out)
        if len(text) < min_len and (before or after):
            # on a side nothing anchors or looks at, more text leaves the match one
            pad = "x" * (min_len - len(text))
            text = text + pad if after else pad + text
        if min_len <= len(text) <= top and re.search(pattern, text):
            return text
    return None


def searches(pattern: str, text: str) -> bool:
    """`re.search`, except that a pattern that does not compile or that `_shape` refuses
    matches nothing."""
    try:
        return _shape(pattern) is not None and re.search(pattern, text) is not None
    except re.error:
        return False


@lru_cache(maxsize=256)
def _shape(pattern: str) -> tuple[Any, bool, bool] | None:
    """The parse tree, and whether text may go before a match and after it (nothing
    anchors or looks around that side); None for a pattern that needs more than LIMIT
    rounds of a repeat, which Python's engine may spend gigabytes on (`(){1000000000}`)."""
    tree = _parser.parse(pattern)
    before = after = True
    stack = [(tree, 1)]
    while stack:
        sub, rounds = stack.pop()
        for op, av in sub:
            if op in (_c.ASSERT, _c.ASSERT_NOT) or (op is _c.AT and av not in _STARTS + _ENDS):
                before = after = False
            elif op is _c.AT:
                before, after = before and av in _ENDS, after and av in _STARTS
            inner = rounds * av[0] if op in _REPEATS else rounds
            if inner > LIMIT:
                return None
            stack.extend((child, inner) for child in _children(op, av))
    return tree, before, after


def _children(op: Any, av: Any) -> list[Any]:
    """The sub-patterns directly under one parsed item."""
    if op is _c.SUBPATTERN:
        return [av[3]]
    if op is _c.BRANCH:
        return list(av[1])
    if op in _REPEATS:
        return [av[2]]
    if op is _c.ATOMIC_GROUP:
        return [av]
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [av[1]]
    if op is _c.GROUPREF_EXISTS:
        return [sub for sub in av[1:] if sub is not None]
    return []


def _width(items: Any, state: Any) -> int:
    """The fewest characters these items can match."""
    return int(_parser.SubPattern(state, list(items)).getwidth()[0])


class _Walk:
    """One pass over the parse tree, appending characters to `out`.

    With `target` None every repeat runs its minimum plus up to `extra` more times;
    with a target length, repeats grow while the text would still fit it.
    """

    def __init__(self, rng: random.Random, extra: int, target: int | None) -> None:
        self.rng, self.extra, self.target = rng, extra, target
        self.out: list[str] = []
        self.groups: dict[int, str] = {}

    def emit(self, items: Any, rest: int) -> None:
        """`rest`: the fewest characters the pattern still needs after these items."""
        seq = list(items)
        state = getattr(items, "state", None)
        tails = [0] * (len(seq) + 1)
        if state is not None and self.target is not None:
            for index in range(len(seq) - 1, -1, -1):
                tails[index] = tails[index + 1] + _width(seq[index : index + 1], state)
        for index, (op, av) in enumerate(seq):
            self.one(op, av, rest + tails[index + 1], state)
            if len(self.out) > LIMIT:
                raise _Miss

    def one(self, op: Any, av: Any, rest: int, state: Any) -> None:
        if op is _c.LITERAL:
            self.out.append(chr(av))
        elif op is _c.NOT_LITERAL:
            self.out.append(next(ch for ch in "ab0" if ch.lower() != chr(av).lower()))
        elif op is _c.ANY:
            self.out.append(self.rng.choice(_NICE[:26]))
        elif op is _c.IN:
            self.out.append(self.char(av))
        elif op is _c.BRANCH:
            self.emit(self.rng.choice(av[1]), rest)
        elif op is _c.SUBPATTERN:
            start = len(self.out)
            self.emit(av[3], rest)
            if av[0] is not None:
                self.groups[av[0]] = "".join(self.out[start:])
        elif op in _REPEATS:
            self.repeat(av[0], av[1], av[2], rest, state)
        elif op is _c.GROUPREF:
            self.out.extend(self.groups.get(av, ""))
        elif op is _c.GROUPREF_EXISTS:
            self.emit(av[1] if av[0] in self.groups else (av[2] or []), rest)
        elif op is _c.ATOMIC_GROUP:
            self.emit(av, rest)
        # AT (anchors, boundaries), ASSERT, ASSERT_NOT emit nothing: re.search decides

    def repeat(self, low: int, high: int, body: Any, rest: int, state: Any) -> None:
        # `_shape` has refused patterns whose `low` could run away
        if self.target is None:
            for _ in range(low + self.rng.randint(0, min(self.extra, high - low))):
                self.emit(body, rest)
            return
        for _ in range(low):
            self.emit(body, rest)
        step = max(_width(body, state), 1) if state else 1
        count = low
        while count < high and len(self.out) + step + rest <= self.target:
            before = len(self.out)
            self.emit(body, rest)
            count += 1
            if len(self.out) == before:
                break

    def char(self, items: list[tuple[Any, Any]]) -> str:
        negate = bool(items) and items[0][0] is _c.NEGATE
        for pool in (_NICE, _OTHER, _seeds(items)):
            hits = [ch for ch in pool if _in_class(items, ch) != negate]
            if hits:
                return self.rng.choice(hits)
        raise _Miss


def _in_class(items: Iterable[tuple[Any, Any]], ch: str) -> bool:
    code = ord(ch)
    for op, av in items:
        if (
            (op is _c.LITERAL and av == code)
            or (op is _c.RANGE and av[0] <= code <= av[1])
            or (op is _c.CATEGORY and av in _CATEGORIES and _CATEGORIES[av](ch))
        ):
            return True
    return False


def _seeds(items: Iterable[tuple[Any, Any]]) -> str:
    """Characters a class names outright (its literals and range ends), plus a few from
    the planes beyond Latin, for classes the usual alphabet misses."""
    named = [chr(av) for op, av in items if op is _c.LITERAL]
    named += [chr(end) for op, av in items if op is _c.RANGE for end in av]
    return "".join(named) + "".join(chr(code) for code in range(0x100, 0x3000, 0x61))
