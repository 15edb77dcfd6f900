"""Model output (Markdown) as Discord's markdown, one piece of a reply at a time.

Discord renders nearly the Markdown a model writes: `**bold**`, `*italic*`, `~~strike~~`,
`` `code` ``, fenced blocks with their language, `[text](https://...)` links and lists.
So the text goes mostly as it is; what the conversion adds is the fence carried across
a split reply (a piece that starts inside a code block opens it again, see
`text.render`) and headings as bold lines (Discord's `#` headings are banner-sized in a
chat). Nothing is escaped to keep pings out: every message goes with no allowed
mentions, so `@everyone` or `<@id>` in model output shows and notifies nobody.
"""

from __future__ import annotations

from stoker.platforms.markdown import Markup
from stoker.platforms.text import FENCE

discord_markdown = Markup(
    open_block=lambda fence: f"{FENCE}{fence.info}\n",
    close_block=lambda fence, end: FENCE + end,
    block_line=lambda line: line,
    prose=lambda text: text,
    code_span=lambda code: f"`{code}`",
    heading=lambda text: f"**{text}**",
)
"""Model output as a Discord message's content, a piece at a time: `text.render`'s
converter."""
