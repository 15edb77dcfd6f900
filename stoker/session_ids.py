"""Session ids as people type them: the shortest start of each id that names it alone,
and the way back from such a start to the id.

Ids are 32 hex digits, too long for a narrow terminal and for typing; a child session
(a fork, a review, a compaction, a sub-agent) is its parent's id with `.review-1a2b3c4d`
added. `stoker sessions list` prints a start of each id long enough to name it, and
`show` / `export` / `rm` / `report` / `chat --resume` accept any such start:

- a start that one session's id begins with names that session;
- a start that names a session and only its own children (its id with `.` and more)
  names that session: `68a132a6` is the main session even once it has reviews;
- a whole id always names its own session.

A child's short id is therefore its parent's whole id and its own part (`.review-1a2b3c4d`)
whole, never a start cut at the `.` that means nothing to the reader.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from stoker.errors import AmbiguousSessionId, SessionNotFound
from stoker.store.base import SqlEventStore

MIN_LENGTH = 8  # a short id reads like a git hash: enough to stay unique as a store grows
MAX_CANDIDATES = 10
SEPARATOR = "."  # between a parent's id and its child's own part
_PAST_SEPARATOR = chr(ord(SEPARATOR) + 1)  # sorts right after every `id.` start


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _descends(sid: str, ancestor: str) -> bool:
    return sid.startswith(ancestor + SEPARATOR)


def short_ids(ids: Iterable[str], among: Iterable[str]) -> dict[str, str]:
    """For each of `ids`, its shortest start (at least `MIN_LENGTH` characters, or the whole
    id) that `pick` reads back as that id among `among`. Its own children do not count:
    a start that names a session and its children names the session. In sorted order the
    others sharing a start with one id sit next to it once its children (one run: they
    all begin with the id and `.`) are skipped, so only those two neighbours decide."""
    ordered = sorted(set(among) | set(ids))
    where = {sid: i for i, sid in enumerate(ordered)}
    out: dict[str, str] = {}
    for sid in ids:
        i = where[sid]
        children = bisect_left(ordered, sid + SEPARATOR, lo=i + 1)  # where they would start
        past = bisect_left(ordered, sid + _PAST_SEPARATOR, lo=children)  # and end
        neighbours = [ordered[i - 1]] if i > 0 else []
        following = i + 1 if i + 1 < children else past
        if following < len(ordered):
            neighbours.append(ordered[following])
        shared = max((_common(sid, n) for n in neighbours), default=0)
        out[sid] = _whole_part(sid, max(MIN_LENGTH, shared + 1))
    return out


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


async def resolve(store: SqlEventStore, given: str) -> str:
    """The id of the session `given` (a whole id or a unique start of one) names."""
    return pick(given, await store.session_ids(given) if given else [])
