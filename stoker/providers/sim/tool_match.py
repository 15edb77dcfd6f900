"""Which offered tool a user's words are about: the rule model's stand-in for judgement.

A real model reads "What files are in this folder?" and lists the files. The simulator
does the same by arithmetic, never by guessing: the prompt's words and each tool's name
and description are cut into stems (lowercase, a small stop list dropped, a few common
synonyms folded into one word, plural and verb endings stripped) and each tool scores
the stems it shares with the prompt. A stem in the tool's name counts twice what one in
its description counts, and every stem is weighted by how few of the offered tools have
it (a word every tool mentions, like "workspace", is dropped: it decides nothing).

A tool is called only when the prompt shares a stem with its name, or two with its
description, so small talk calls nothing; and never when the prompt says to call none
("without calling tools", as a compaction's instruction does: a model follows that).
Ties go to the tool with fewer required arguments (it needs the least the user did not
say), then to the first offered. A tool the prompt names outright (`read_file`, or all
the parts of its name) wins before any scoring, as it always has.

The same request gives the same choice in every process: nothing here depends on a
random source, the clock or dict order beyond the order the tools were offered in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_RAW_WORD = re.compile(r"[A-Za-z0-9_./-]+")

NAME_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0

_STOP_WORDS = """a about above after again all also am an and any are as at be been before being
    but by can could did do does doing done for from get give go had has have having
    he her here hers him his how i if in into is it its itself just let like me mine
    more most my no nor not now of off on once one only or other our ours out over
    please same she should so some such than that the their theirs them then there
    these they this those through to too two under until up us very was we were what
    when where which while who whom whose why will with would you your yours yourself
    hello hi hey thanks thank ok okay yes want need tell know see make use using"""
STOP = frozenset(_STOP_WORDS.split())
"""Words that say nothing about what a tool does."""

SYNONYMS: Mapping[str, str] = {
    # words people use for a tool's verb or object -> the word tools tend to use
    "find": "search",
    "look": "search",
    "grep": "search",
    "locate": "search",
    "show": "list",
    "display": "list",
    "enumerate": "list",
    "ls": "list",
    "open": "read",
    "view": "read",
    "cat": "read",
    "contents": "read",
    "content": "read",
    "many": "count",
    "number": "count",
    "remember": "note",
    "jot": "note",
    "memo": "note",
    "folder": "file",
    "folders": "file",
    "directory": "file",
    "directories": "file",
    "dir": "file",
    "project": "workspace",
    "document": "file",
    "documents": "file",
    "doc": "file",
    "docs": "file",
}


def stem(word: str) -> str:
    """A crude, symmetric stemmer: `files`, `file` -> `fil`; `listing`, `listed` ->
    `list`; `searches` -> `search`; `entries` -> `entry`. Both sides go through it, so
    only agreement matters, not linguistics."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes", "zes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # running -> run, planned -> plan
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]  # write / writing -> writ, note / noted -> not
    return w


def stems(text: str) -> frozenset[str]:
    """The content stems of `text`: words split at case changes and punctuation, stop
    words dropped, synonyms folded, each stemmed."""
    out = set()
    for chunk in _WORD.findall(_CAMEL.sub(" ", text)):
        word = chunk.lower()
        if word in STOP or len(word) < 2 or word.isdigit():
            continue
        out.add(stem(SYNONYMS.get(word, word)))
    return frozenset(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    """One tool's score against the prompt, and why (the stems it shares)."""

    index: int  # its place among the offered tools
    name: str
    score: float
    in_name: frozenset[str]
    in_description: frozenset[str]
    required: int  # how many arguments its schema requires

    @property
    def relevant(self) -> bool:
        """Enough in common to call it: a word of its name, or two of its description."""
        return bool(self.in_name) or len(self.in_description) >= 2


def _named(spec: Mapping[str, Any], raw_words: set[str]) -> bool:
    """The prompt names the tool outright: its name, or every longer part of it."""
    name = str(spec.get("name", "")).lower()
    parts = [p for p in re.split(r"[_\-]", name) if len(p) > 2]
    return name in raw_words or bool(parts and all(p in raw_words for p in parts))


def rank(specs: Sequence[Mapping[str, Any]], text: str) -> list[Match]:
    """Every offered tool scored against `text`, best first (ties as the module says)."""
    if not specs:
        return []
    names = [stems(str(s.get("name", ""))) for s in specs]
    descriptions = [stems(str(s.get("description") or "")) for s in specs]
    count = len(specs)
    # A stem every offered tool has tells them apart no better than silence.
    everywhere = frozenset.intersection(*(n | d for n, d in zip(names, descriptions, strict=True)))
    asked = stems(text) - everywhere if count > 1 else stems(text)

    def weight(word: str) -> float:
        having = sum(1 for n, d in zip(names, descriptions, strict=True) if word in n | d)
        return 1.0 + math.log(count / having)

    found = []
    for i, spec in enumerate(specs):
        in_name, in_description = asked & names[i], asked & descriptions[i]
        # summed in sorted order: a set's order changes with the process's hash seed
        score = NAME_WEIGHT * sum(map(weight, sorted(in_name)))
        score += DESCRIPTION_WEIGHT * sum(map(weight, sorted(in_description)))
        schema = spec.get("input_schema") or spec.get("parameters") or {}
        required = schema.get("required") if isinstance(schema, Mapping) else None
        found.append(
            Match(
                index=i,
                name=str(spec.get("name", "")),
                score=round(score, 9),  # scores equal in exact arithmetic compare equal
                in_name=in_name,
                in_description=in_description,
                required=len(required) if isinstance(required, list) else 0,
            )
        )
    return sorted(found, key=lambda m: (-m.score, m.required, m.index))


_NO_TOOLS = re.compile(
    r"\b(?:without (?:calling|using) (?:any )?tools?|do(?:n'?t| not) (?:call|use) (?:any )?"
    r"tools?|no tool calls?)\b",
    re.IGNORECASE,
)


def named_tool(specs: Sequence[Mapping[str, Any]], text: str) -> int | None:
    """The index of the first tool `text` names outright (`read_file`, or every longer
    part of its name), or None."""
    raw_words = {w.strip("./-").lower() for w in _RAW_WORD.findall(text)}
    return next((i for i, spec in enumerate(specs) if _named(spec, raw_words)), None)


def best_tool(specs: Sequence[Mapping[str, Any]], text: str, *, named: bool = True) -> int | None:
    """The index of the tool `text` is about (one it names first, unless `named` is
    False), or None when it is about none of them or says not to call any ("without
    calling tools", as a compaction asks)."""
    if _NO_TOOLS.search(text):
        return None
    found = named_tool(specs, text) if named else None
    if found is not None:
        return found
    ranked = rank(specs, text)
    return next((m.index for m in ranked if m.relevant and m.score > 0), None)
