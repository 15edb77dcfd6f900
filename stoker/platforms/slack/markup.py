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

from stoker.platforms.markdown import Markup
from stoker.platforms.text import FENCE

_ITALIC = re.compile(r"(?<![*\w])\*([^*\n<>|]+?)\*(?![*\w])")
_BOLD = re.compile(r"\*\*([^*\n<>|]+?)\*\*")
_STRIKE = re.compile(r"~~([^~\n<>|]+?)~~")
_LINK = re.compile(r"\[([^\]\n<>|]+)\]\((https?://[^\s)\"<>|]+)\)")


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


slack_mrkdwn = Markup(
    open_block=lambda fence: FENCE + "\n",  # no language: Slack would show it as code
    close_block=lambda fence, end: FENCE + end,
    block_line=escape,
    prose=_prose,
    code_span=lambda code: f"`{escape(code)}`",
    heading=lambda text: f"*{text}*",
)
"""Model output as Slack mrkdwn (a message's `text`), a piece at a time: `text.render`'s
converter."""
