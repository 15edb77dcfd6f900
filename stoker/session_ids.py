"""Session ids as people type them: a short id for every session, and the way back from
it (or from any unique start of an id) to the id.

Ids are 32 hex digits, too long for a narrow terminal and for typing; a child session
(a fork, a review, a compaction, a sub-agent) is its parent's id with `.review-1a2b3c4d`
added, and a child of a child adds another. `stoker sessions list` prints a short id for
each, and `show` / `export` / `rm` / `report` / `chat --resume` accept it:

- a main session's short id is the shortest start of its id (at least `MIN_LENGTH`
  characters) that no other session's id has, its own children aside: `68a132a6` stays
  the main session even once it has reviews;
- a child's short id is its parent's short id, the `.`, and the shortest start of its own
  part that no sibling's part has, keeping the role and at least `PART_DIGITS` of the hex
  digits: `68a132a6.review-1a2b`, and its own fork `68a132a6.review-1a2b.fork-99aa`.

Reading one back (`name_in`): a string that ids start with names the one of them the
others are children of (a whole id always names itself); one that no id starts with and
that holds a `.` is read part by part: what comes before the last `.` names the parent,
and the rest must start the own part of one of its children.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from stoker.errors import AmbiguousSessionId, SessionNotFound
from stoker.store.base import SqlEventStore

MIN_LENGTH = 8  # a short id reads like a git hash: enough to stay unique as a store grows
PART_DIGITS = 4  # hex digits of a child's own part kept after its role (`review-1a2b`)
MAX_CANDIDATES = 10
SEPARATOR = "."  # between a parent's id and its child's own part
_PAST_SEPARATOR = chr(ord(SEPARATOR) + 1)  # sorts right after every `id.` start
_LAST = chr(0x10FFFF)  # sorts after every character: `start + _LAST` ends a start's run


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _descends(sid: str, ancestor: str) -> bool:
    return sid.startswith(ancestor + SEPARATOR)


def _starting(ordered: Sequence[str], start: str) -> list[str]:
    """The ids of sorted `ordered` that begin with `start`."""
    lo = bisect_left(ordered, start)
    return list(ordered[lo : bisect_left(ordered, start + _LAST, lo=lo)])


def short_ids(ids: Iterable[str], among: Iterable[str]) -> dict[str, str]:
    """The short id of each of `ids` among the sessions `among` (see the module
    docstring); `name_in` reads each back as its id. A child whose parent is not among
    them is shortened as a main session is."""
    ordered = sorted(set(among) | set(ids))
    known = set(ordered)
    out: dict[str, str] = {}

    def short(sid: str) -> str:
        if sid in out:
            return out[sid]
        parent, dot, part = sid.rpartition(SEPARATOR)
        if dot and parent in known:
            siblings = [
                c[len(parent) + 1 :]
                for c in _starting(ordered, parent + SEPARATOR)
                if SEPARATOR not in c[len(parent) + 1 :]
            ]
            candidate = f"{short(parent)}{SEPARATOR}{_own_start(part, siblings)}"
        else:
            candidate = _main_start(sid, ordered)
        # What is printed must read back as `sid`; the whole id always does (ids that
        # spell a `.` themselves could make a shortened one mean another session).
        out[sid] = candidate if _reads_back(candidate, ordered) == sid else sid
        return out[sid]

    return {sid: short(sid) for sid in ids}


def _reads_back(given: str, ordered: Sequence[str]) -> str | None:
    try:
        return name_in(given, ordered)
    except (SessionNotFound, AmbiguousSessionId):
        return None


def _main_start(sid: str, ordered: Sequence[str]) -> str:
    """The shortest start of `sid` (at least `MIN_LENGTH` characters, or the whole id)
    that no other id of sorted `ordered` begins with, its own children aside. In sorted
    order the others sharing a start with it sit next to it once its children (one run:
    they all begin with the id and `.`) are skipped, so only those two neighbours decide."""
    i = bisect_left(ordered, sid)
    children = bisect_left(ordered, sid + SEPARATOR, lo=i + 1)  # where they would start
    past = bisect_left(ordered, sid + _PAST_SEPARATOR, lo=children)  # and end
    neighbours = [ordered[i - 1]] if i > 0 else []
    following = i + 1 if i + 1 < children else past
    if following < len(ordered):
        neighbours.append(ordered[following])
    shared = max((_common(sid, n) for n in neighbours), default=0)
    return _whole_part(sid, max(MIN_LENGTH, shared + 1))


def _own_start(part: str, siblings: Sequence[str]) -> str:
    """The shortest start of a child's own `part` that no sibling's part has, keeping
    its role and at least `PART_DIGITS` characters after it."""
    floor = part.rfind("-") + 1 + PART_DIGITS
    shared = max((_common(part, s) for s in siblings if s != part), default=0)
    return part[: max(floor, shared + 1)]


def _whole_part(sid: str, length: int) -> str:
    """`sid` cut at `length`, or further: a cut inside a child's own part (after a `.`)
    runs on to the end of that part, so a list never shows `<parent>.` or `<parent>.r`."""
    dot = sid.rfind(SEPARATOR, 0, length)
    if dot < 0:
        return sid[:length]
    end = sid.find(SEPARATOR, length)
    return sid if end < 0 else sid[:end]


def pick(given: str, matches: Sequence[str]) -> str:
    """The one id that `given` names among `matches` (the ids starting with it): itself
    when it is a whole id; else the only match, or the one match all the others are
    children of; otherwise a clear error."""
    if given in matches:
        return given
    if len(matches) == 1 and given:
        return matches[0]
    if not matches or not given:
        raise SessionNotFound(given)
    shortest = min(matches, key=len)
    if all(m == shortest or _descends(m, shortest) for m in matches):
        return shortest  # a session and its own children: the session
    raise AmbiguousSessionId(given, sorted(matches)[:MAX_CANDIDATES])


def name_in(given: str, ordered: Sequence[str]) -> str:
    """The id `given` names among the sorted ids `ordered`: a start of ids (`pick`), or
    else a short id read part by part (the module docstring)."""
    matches = _starting(ordered, given) if given else []
    if matches or SEPARATOR not in given:
        return pick(given, matches)
    head, _, tail = given.rpartition(SEPARATOR)
    try:
        parent = name_in(head, ordered)
    except SessionNotFound:
        raise SessionNotFound(given) from None
    start = parent + SEPARATOR + tail
    children = _starting(ordered, start)
    try:
        return pick(start, children)
    except SessionNotFound:
        raise SessionNotFound(given) from None
    except AmbiguousSessionId as exc:
        raise AmbiguousSessionId(given, exc.candidates) from None


async def resolve(store: SqlEventStore, given: str) -> str:
    """The id of the session `given` (a whole id, a unique start of one, or a short id
    as `stoker sessions list` prints it) names."""
    if not given:
        raise SessionNotFound(given)
    # Every id `given` can name begins with its first part: fetch those once.
    return name_in(given, sorted(await store.session_ids(given.split(SEPARATOR, 1)[0])))
