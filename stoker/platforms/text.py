"""Long replies in pieces a platform accepts: split at its length limit, then converted.

`split` is pure and loses nothing: its pieces joined are the text, in order. It cuts at
the best boundary in the second half of what fits: a paragraph, then a line, outside a
code fence before inside one, then a space, and only then mid-word. `render` converts
each piece to the platform's markup, carrying an open code fence over into the next
piece (closed at the end of one message, reopened at the start of the next), and splits
a piece again when its markup outgrew the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Measure = Callable[[str], int]
FENCE = "```"
MIN_LIMIT = 64  # below this a fence's markup alone may not fit
INFO_MAX = 16
"""A fence's info string (its language) as far as it is kept: a model may write any
length there, and every message the fence spans repeats it, so the longest opening and
closing markup plus a character must still fit in `MIN_LIMIT`."""


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units: how Telegram counts a message (an emoji is 2)."""
    return len(text.encode("utf-16-le")) // 2


def _fits(text: str, start: int, limit: int, measure: Measure) -> int:
    """The largest end such that text[start:end] measures at most `limit` (additive)."""
    if measure is len:
        return min(len(text), start + limit)
    used, end = 0, start
    while end < len(text):
        cost = measure(text[end])
        if used + cost > limit:
            break
        used += cost
        end += 1
    return end


def _fence_opens(text: str) -> list[int]:
    """Offsets where a line starting a code fence begins."""
    out, offset = [], 0
    for line in text.splitlines(keepends=True):
        if line.lstrip(" ").startswith(FENCE):
            out.append(offset)
        offset += len(line)
    return out


def _inside(fences: list[int], at: int) -> bool:
    """Whether a cut at `at` falls inside a code fence (an odd number of fence lines
    begin before it)."""
    return sum(1 for f in fences if f < at) % 2 == 1


def _cut(text: str, start: int, end: int, fences: list[int]) -> int:
    if end >= len(text):
        return len(text)
    floor = start + max(1, (end - start) // 2)
    for sep, outside in (("\n\n", True), ("\n", True), ("\n", False), (" ", True), (" ", False)):
        at = text.rfind(sep, floor, end)
        while at >= floor:
            cut = at + len(sep)
            if cut <= end and (not outside or not _inside(fences, cut)):
                return cut
            at = text.rfind(sep, floor, at)
    return end


def _next(text: str, start: int, limit: int, measure: Measure, fences: list[int]) -> int:
    """Where the piece starting at `start` ends."""
    end = _fits(text, start, limit, measure)
    if end == start:  # one character over the limit: it goes alone
        end = start + 1
    return _cut(text, start, end, fences)


def split(text: str, limit: int, *, measure: Measure = len) -> list[str]:
    """Pieces of `text`, each measuring at most `limit`, that join back to `text`."""
    if limit < 1:
        raise ValueError(f"limit must be positive, not {limit}")
    fences = _fence_opens(text)
    pieces, start = [], 0
    while start < len(text):
        cut = _next(text, start, limit, measure, fences)
        pieces.append(text[start:cut])
        start = cut
    return pieces


@dataclass(frozen=True, slots=True, kw_only=True)
class Fence:
    """A code fence left open at the end of a piece: its info string (the language)."""

    info: str = ""


Convert = Callable[[str, Fence | None], tuple[str, Fence | None]]
"""(piece, fence open at its start) -> (markup, fence open at its end)."""


def render(text: str, limit: int, convert: Convert, *, measure: Measure = len) -> list[str]:
    """`text` as messages of the platform's markup, each measuring at most `limit`.

    Each message takes as much of the text as fits once converted: a piece whose markup
    is over the limit is cut shorter (in proportion, then at the best boundary again)."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}, not {limit}")
    fences = _fence_opens(text)
    out: list[str] = []
    fence: Fence | None = None
    start = 0
    while start < len(text):
        room = limit
        while True:
            cut = _next(text, start, room, measure, fences)
            markup, after = convert(text[start:cut], fence)
            size = measure(markup)
            if size <= limit or cut - start == 1:
                break
            piece = measure(text[start:cut])
            room = max(1, min(piece - 1, piece * limit // size - 8))
        if markup.strip():
            out.append(markup)
        fence, start = after, cut
    return out
