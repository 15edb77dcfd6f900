"""Model output (Markdown) as Slack's mrkdwn, one piece of a reply at a time.

Slack reads `*bold*`, `_italic_`, `~strike~`, `` `code` ``, fenced blocks between
```` ``` ```` and links as `<https://url|text>`. Everything else in a message must have
`&`, `<` and `>` escaped: an unescaped `<` starts a control sequence, so model output
could otherwise ping a channel (`<!channel>`) or a user (`<@U123>`). The only `<` this
conversion emits opens a link it made from a Markdown link to an http(s) URL. A fence's
language is dropped (Slack would show it as the code's first line); a piece that starts
inside a fence (the reply was split there) is opened as code again (see `text.render`).
"""

from __future__ import annotations

import re

from stoker.gateway.platforms.text import FENCE, Fence

_CODE = re.compile(r"`([^`\n]+)`")
_ITALIC = re.compile(r"(?<![*\w])\*([^*\n<>|]+?)\*(?![*\w])")
_BOLD = re.compile(r"\*\*([^*\n<>|]+?)\*\*")
_STRIKE = re.compile(r"~~([^~\n<>|]+?)~~")
_LINK = re.compile(r"\[([^\]\n<>|]+)\]\((https?://[^\s)\"<>|]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+)$")


def escape(text: str) -> str:
    """Text shown as it is: `&`, `<` and `>` as Slack's entities (nothing else)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _emphasis(text: str) -> str:
    out = _ITALIC.sub(r"_\1_", text)  # before bold, which becomes single stars
    out = _BOLD.sub(r"*\1*", out)
    return _STRIKE.sub(r"~\1~", out)


def _prose(text: str) -> str:
    """One line outside code spans: escaped, then its links, and emphasis between them
    (never inside a link, whose URL may hold stars)."""
    out, last, escaped = [], 0, escape(text)
    for m in _LINK.finditer(escaped):
        out.append(_emphasis(escaped[last : m.start()]))
        out.append(f"<{m[2]}|{m[1]}>")
        last = m.end()
    out.append(_emphasis(escaped[last:]))
    return "".join(out)


def _inline(line: str) -> str:
    parts, last = [], 0
    for m in _CODE.finditer(line):
        parts.append(_prose(line[last : m.start()]))
        parts.append(f"`{escape(m[1])}`")
        last = m.end()
    parts.append(_prose(line[last:]))
    return "".join(parts)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading[1])}*"
    return _inline(line)


def slack_mrkdwn(piece: str, fence: Fence | None) -> tuple[str, Fence | None]:
    """`piece` as Slack mrkdwn (a message's `text`); `fence` is open at its start."""
    out = [FENCE + "\n"] if fence is not None else []
    for line in piece.splitlines(keepends=True):
        body, end = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        if body.lstrip(" ").startswith(FENCE):
            if fence is None:
                fence = Fence(info=body.lstrip(" ")[3:].strip())
                out.append(FENCE + "\n")
            else:
                out.append(FENCE + end)
                fence = None
            continue
        if fence is not None:
            out.append(escape(line))
        else:
            out.append(_line(body) + end)
    if fence is not None:
        out.append(FENCE)
    return "".join(out), fence
