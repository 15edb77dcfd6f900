"""Splitting and converting replies for chat platforms, by generation: untrusted model
output must never produce a message over the limit, lose or reorder text, or leave
markup the platform refuses."""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stoker.platforms.discord.markup import discord_markdown
from stoker.platforms.slack.markup import slack_mrkdwn
from stoker.platforms.telegram.markup import telegram_html
from stoker.platforms.text import FENCE, Fence, render, split, utf16_length

Convert = Callable[[str, Fence | None], tuple[str, Fence | None]]
PRE = '<pre><code class="language-python">'

WORDS = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=400)
MARKDOWN = st.lists(
    st.sampled_from(
        [
            *("**", "*", "`", "```", "```py\n", "\n", "\n\n", " ", "~~", "# ", "[", "]"),
            *("[a](https://x.y/z)", "(https://q.r)", "[**b](https://s.t)"),
        ]
    )
    | st.text(alphabet="ab&<>é😀 ", min_size=1, max_size=12),
    max_size=120,
).map("".join)


@given(text=WORDS | MARKDOWN, limit=st.integers(1, 300))
@example(text="😀" * 10, limit=3)
def test_split_keeps_every_character_in_order_within_the_limit(text: str, limit: int) -> None:
    for measure in (len, utf16_length):
        if measure is utf16_length and limit < 2:
            continue
        pieces = split(text, limit, measure=measure)
        assert "".join(pieces) == text
        assert all(p and measure(p) <= limit for p in pieces)


PARAGRAPH = st.text(alphabet="abc de\n", min_size=1, max_size=40).map(
    lambda s: s.replace("\n\n", "\n").strip("\n") or "x"
)


@given(paragraphs=st.lists(PARAGRAPH, min_size=1, max_size=30))
def test_split_cuts_between_paragraphs_when_they_fit(paragraphs: list[str]) -> None:
    text = "\n\n".join(paragraphs)
    pieces = split(text, 100)
    assert "".join(pieces) == text
    assert all(p.endswith("\n\n") for p in pieces[:-1])


BLOCK = st.tuples(st.booleans(), st.text(alphabet="xy z\n", min_size=1, max_size=30)).map(
    lambda b: f"{FENCE}py\n{b[1].strip(chr(10)) or 'x'}\n{FENCE}\n" if b[0] else b[1] + "\n"
)


@given(blocks=st.lists(BLOCK, min_size=1, max_size=30))
def test_split_never_cuts_inside_a_code_fence_that_fits(blocks: list[str]) -> None:
    text = "".join(blocks)
    for piece in split(text, 120):
        opened = [line for line in piece.splitlines() if line.startswith(FENCE)]
        assert len(opened) % 2 == 0, piece


class _Tags(HTMLParser):
    """Checks a message is HTML Telegram parses: known tags, each closed in order."""

    ALLOWED = frozenset({"b", "i", "s", "code", "pre", "a"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in self.ALLOWED, tag
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, tag
        assert self.stack.pop() == tag

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _visible(message: str) -> str:
    parser = _Tags()
    parser.feed(message)
    parser.close()
    assert parser.stack == [], message
    return "".join(parser.text)


@settings(max_examples=300)
@given(text=MARKDOWN, limit=st.integers(64, 400))
# a long language: its <pre><code class=...> and closing tags alone once took all 64
@example(
    text="****************<< ```******[a](https://x.y/z)[**b](https://s.t)a```py\n"
    "[a](https://x.y/z)",
    limit=64,
)
def test_telegram_messages_are_balanced_html_within_the_limit(text: str, limit: int) -> None:
    for message in render(text, limit, telegram_html, measure=utf16_length):
        assert utf16_length(message) <= limit
        _visible(message)


@given(text=st.text(alphabet="abc &<>'\"é😀\n", max_size=600), limit=st.integers(64, 200))
def test_plain_text_survives_conversion_exactly(text: str, limit: int) -> None:
    messages = render(text, limit, telegram_html, measure=utf16_length)
    assert "".join(_visible(m) for m in messages).replace(" ", "").replace("\n", "") == (
        text.replace(" ", "").replace("\n", "")
    )


@pytest.mark.parametrize(
    ("convert", "first", "reopened", "closed"),
    [  # Telegram's HTML, Slack's mrkdwn (no language: Slack would show it), Discord's
        (telegram_html, PRE + "line 0 = 0 &lt; 2\n", PRE, "</code></pre>"),
        (slack_mrkdwn, "```\nline 0 = 0 &lt; 2\n", "```\n", "```"),
        (discord_markdown, "```python\nline 0 = 0 < 2\n", "```python\n", "```"),
    ],
    ids=["telegram", "slack", "discord"],
)
def test_a_fence_split_across_messages_is_code_in_each(
    convert: Convert, first: str, reopened: str, closed: str
) -> None:
    code = "\n".join(f"line {i} = {i} < 2" for i in range(40))
    text = f"Here:\n\n```python\n{code}\n```\nDone."
    messages = render(text, 300, convert, measure=utf16_length)
    assert len(messages) > 2
    assert messages[0].startswith("Here:\n\n" + first)
    for m in messages[1:-1]:
        assert m.startswith(reopened)
        assert m.endswith(closed)
    assert "".join(messages).count("line ") == 40


def test_markdown_becomes_telegram_html() -> None:
    text = "# Title\n**bold** and *it* and `a<b` and [docs](https://e.x/a?b=1&c=2) ~~old~~"
    (message,) = render(text, 4096, telegram_html)
    assert message == (
        "<b>Title</b>\n<b>bold</b> and <i>it</i> and <code>a&lt;b</code> and "
        '<a href="https://e.x/a?b=1&amp;c=2">docs</a> <s>old</s>'
    )
