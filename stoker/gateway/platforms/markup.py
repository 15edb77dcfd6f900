"""Model output (Markdown) in a platform's markup, one piece of a reply at a time.

Models write Markdown; Telegram takes a small HTML subset. The conversion never emits
unbalanced tags: bold and italics stay within a line and never span a code span, code
fences become `<pre>`, and everything else is escaped text. A piece that starts inside a
fence (the reply was split there) is opened as code again (see `text.render`).
"""

from __future__ import annotations

import html
import re

from stoker.gateway.platforms.text import FENCE, Fence

_CODE = re.compile(r"`([^`\n]+)`")
# Emphasis never spans a tag (a link's), so no two tags ever overlap.
_BOLD = re.compile(r"\*\*([^*\n<>]+?)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*([^*\n<>]+?)\*(?![*\w])")
_STRIKE = re.compile(r"~~([^~\n<>]+?)~~")
_LINK = re.compile(r"\[([^\]\n<>]+)\]\((https?://[^\s)\"<>]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+)$")


def _pre(fence: Fence) -> str:
    lang = re.sub(r"[^\w+#.-]", "", fence.info)[:32]
    return f'<pre><code class="language-{lang}">' if lang else "<pre>"


def _close(fence: Fence) -> str:
    return "</code></pre>" if _pre(fence) != "<pre>" else "</pre>"


def _prose(text: str) -> str:
    """One line outside code spans: escaped, then its emphasis and links as tags."""
    out = html.escape(text, quote=False)
    out = _LINK.sub(lambda m: f'<a href="{m[2]}">{m[1]}</a>', out)
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _ITALIC.sub(r"<i>\1</i>", out)
    return _STRIKE.sub(r"<s>\1</s>", out)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"<b>{_inline(heading[1])}</b>"
    return _inline(line)


def _inline(line: str) -> str:
    parts, last = [], 0
    for m in _CODE.finditer(line):
        parts.append(_prose(line[last : m.start()]))
        parts.append(f"<code>{html.escape(m[1], quote=False)}</code>")
        last = m.end()
    parts.append(_prose(line[last:]))
    return "".join(parts)


def telegram_html(piece: str, fence: Fence | None) -> tuple[str, Fence | None]:
    """`piece` as Telegram HTML (parse_mode="HTML"); `fence` is open at its start."""
    out = [_pre(fence)] if fence is not None else []
    for line in piece.splitlines(keepends=True):
        body, end = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        if body.lstrip(" ").startswith(FENCE):
            if fence is None:
                fence = Fence(info=body.lstrip(" ")[3:].strip())
                out.append(_pre(fence))
            else:
                out.append(_close(fence))
                fence = None
            continue  # the fence line itself is markup, its newline too
        if fence is not None:
            out.append(html.escape(line, quote=False))
        else:
            out.append(_line(body) + end)
    if fence is not None:
        out.append(_close(fence))
    return "".join(out), fence
