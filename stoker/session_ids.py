"""Session ids as people type them: the shortest start of each id that names it alone,
and the way back from such a start to the id.

Ids are 32 hex digits (forks add `.review-1a2b3c4d`), too long for a narrow terminal and
for typing. `stoker sessions list` prints a start of each id long enough to be unique in
the store, and `show` / `export` / `rm` / `chat --resume` accept any unique start. A whole
id always names its own session, even when it also starts a fork's id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stoker.errors import AmbiguousSessionId, SessionNotFound
from stoker.store.base import SqlEventStore

MIN_LENGTH = 8  # a short id reads like a git hash: enough to stay unique as a store grows
MAX_CANDIDATES = 10


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def short_ids(ids: Iterable[str], among: Iterable[str]) -> dict[str, str]:
    """For each of `ids`, its shortest start (at least `MIN_LENGTH` characters, or the whole
    id) that no other id of `among` begins with. In sorted order the ids sharing a start
    with one id sit next to it, so only its two neighbours decide."""
    ordered = sorted(set(among) | set(ids))
    where = {sid: i for i, sid in enumerate(ordered)}
    out: dict[str, str] = {}
    for sid in ids:
        i = where[sid]
        shared = max(
            (_common(sid, ordered[j]) for j in (i - 1, i + 1) if 0 <= j < len(ordered)),
            default=0,
        )
        out[sid] = sid[: max(MIN_LENGTH, shared + 1)]
    return out


def pick(given: str, matches: Sequence[str]) -> str:
    """The one id that `given` names among `matches` (the ids starting with it): itself
    when it is a whole id, else the only match; otherwise a clear error."""
    if given in matches:
        return given
    if len(matches) == 1 and given:
        return matches[0]
    if not matches or not given:
        raise SessionNotFound(given)
    raise AmbiguousSessionId(given, sorted(matches)[:MAX_CANDIDATES])


async def resolve(store: SqlEventStore, given: str) -> str:
    """The id of the session `given` (a whole id or a unique start of one) names."""
    return pick(given, await store.session_ids(given) if given else [])
