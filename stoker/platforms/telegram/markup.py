"""Model output (Markdown) in a platform's markup, one piece of a reply at a time.

Models write Markdown; Telegram takes a small HTML subset. The conversion never emits
unbalanced tags: bold and italics stay within a line and never span a code span, code
fences become `<pre>`, and everything else is escaped text. A piece that starts inside a
fence (the reply was split there) is opened as code again (see `text.render`).
"""

from __future__ import annotations

import html
import re

from stoker.platforms.markdown import Markup
from stoker.platforms.text import Fence

# Emphasis never spans a tag (a link's), so no two tags ever overlap.
_BOLD = re.compile(r"\*\*([^*\n<>]+?)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*([^*\n<>]+?)\*(?![*\w])")
_STRIKE = re.compile(r"~~([^~\n<>]+?)~~")
_LINK = re.compile(r"\[([^\]\n<>]+)\]\((https?://[^\s)\"<>]+)\)")


def _pre(fence: Fence) -> str:
    lang = re.sub(r"[^\w+#.-]", "", fence.info)
    return f'<pre><code class="language-{lang}">' if lang else "<pre>"


def _close(fence: Fence) -> str:
    return "</code></pre>" if _pre(fence) != "<pre>" else "</pre>"


def _prose(text: str) -> str:
    """One line outside code spans: escaped, then its emphasis and links as tags."""
    out = _escape(text)
    out = _LINK.sub(lambda m: f'<a href="{m[2]}">{m[1]}</a>', out)
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _ITALIC.sub(r"<i>\1</i>", out)
    return _STRIKE.sub(r"<s>\1</s>", out)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


telegram_html = Markup(
    open_block=_pre,
    close_block=lambda fence, end: _close(fence),  # the fence's newline is markup too
    block_line=_escape,
    prose=_prose,
    code_span=lambda code: f"<code>{_escape(code)}</code>",
    heading=lambda text: f"<b>{text}</b>",
)
"""Model output as Telegram HTML (parse_mode="HTML"), a piece at a time: `text.render`'s
converter."""
