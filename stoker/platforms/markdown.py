"""Model output read as Markdown, line by line, for any platform's markup.

Every converter walks a piece the same way: code fences open and close blocks (a piece
that starts inside one was split there, and opens it again), a line inside a block is
only escaped, and a line outside one is split at its code spans, a heading made bold.
What differs is how a platform writes each of those: a `Markup` says it, and calling it
on a piece does the walk, so a platform's table is its `text.render` converter
(Telegram's HTML, Slack's mrkdwn and Discord's markdown, each in its `markup`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from stoker.platforms.text import FENCE, INFO_MAX, Fence

_CODE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^#{1,6} +(.+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Markup:
    """How a platform writes what Markdown means.

    `open_block(fence)` starts a code block; `close_block(fence, end)` ends one, where
    `end` is the closing fence line's newline ("" when the piece ends inside the block);
    `block_line` escapes a line inside a block; `prose` converts text outside code spans
    (escaped, with its emphasis and links); `code_span` writes an inline code span and
    `heading` a heading's converted text.
    """

    open_block: Callable[[Fence], str]
    close_block: Callable[[Fence, str], str]
    block_line: Callable[[str], str]
    prose: Callable[[str], str]
    code_span: Callable[[str], str]
    heading: Callable[[str], str]

    def __call__(self, piece: str, fence: Fence | None) -> tuple[str, Fence | None]:
        """`piece` in this markup; `fence` is open at its start. The fence open at its end
        too."""
        out = [self.open_block(fence)] if fence is not None else []
        for line in piece.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            end = line[len(body) :]
            if body.lstrip(" ").startswith(FENCE):
                if fence is None:
                    fence = Fence(info=body.lstrip(" ")[3:].strip()[:INFO_MAX])
                    out.append(self.open_block(fence))
                else:
                    out.append(self.close_block(fence, end))
                    fence = None
                continue
            if fence is not None:
                out.append(self.block_line(line))
            else:
                out.append(_line(body, self) + end)
        if fence is not None:
            out.append(self.close_block(fence, ""))
        return "".join(out), fence


def _line(line: str, markup: Markup) -> str:
    heading = _HEADING.match(line)
    if heading:
        return markup.heading(_inline(heading[1], markup))
    return _inline(line, markup)


def _inline(line: str, markup: Markup) -> str:
    parts, last = [], 0
    for m in _CODE.finditer(line):
        parts.append(markup.prose(line[last : m.start()]))
        parts.append(markup.code_span(m[1]))
        last = m.end()
    parts.append(markup.prose(line[last:]))
    return "".join(parts)
