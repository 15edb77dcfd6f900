"""Replies as Discord messages, by generation: untrusted model output never makes a
message over Discord's limit, and loses or reorders no text; a code block split across
messages is code in each."""

from __future__ import annotations

from discord.utils import escape_markdown
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.platforms.discord.adapter import LIMIT, _plain
from stoker.platforms.discord.markup import discord_markdown
from stoker.platforms.text import render, utf16_length
from tests.test_platform_text import MARKDOWN, WORDS


@settings(max_examples=300)
@given(text=MARKDOWN | WORDS, limit=st.integers(64, 400))
def test_messages_stay_within_the_limit(text: str, limit: int) -> None:
    for message in render(text, limit, discord_markdown, measure=utf16_length):
        assert utf16_length(message) <= limit


def test_a_long_language_is_cut_and_every_message_keeps_room_for_the_code() -> None:
    """The language a model writes after a fence is repeated in every message the block
    spans: kept to its first 16 characters, it leaves each message room for code."""
    code = "\n".join(f"line {n}" for n in range(40))
    messages = render(f"```{'x' * 300}\n{code}\n```", 64, discord_markdown)
    assert all(m.startswith(f"```{'x' * 16}\n") and len(m) <= 64 for m in messages)
    # the rest of the overlong fence line (it was split) comes first, as code
    assert (
        "".join(m.split("\n", 1)[1].removesuffix("```") for m in messages).rstrip().endswith(code)
    )


@given(text=st.text(alphabet="ab *_~`#&<>@é😀\n", max_size=600), limit=st.integers(64, 200))
def test_text_outside_code_survives_as_written(text: str, limit: int) -> None:
    """Discord reads Markdown itself: every character arrives, in order (whitespace at
    a cut may go, a heading's marks become bold, a fence is closed and reopened)."""
    messages = render(text.replace("`", "").replace("#", ""), limit, discord_markdown)
    squeeze = str.maketrans("", "", " \n")
    assert "".join(messages).translate(squeeze) == text.replace("`", "").replace("#", "").translate(
        squeeze
    )


def test_headings_become_bold_and_the_rest_is_left_to_discord() -> None:
    text = "## Plan\n**bold**, *it*, ~~old~~, `a<b`, [docs](https://e.x/a?b=1&c=2) @everyone"
    assert render(text, LIMIT, discord_markdown) == [
        "**Plan**\n**bold**, *it*, ~~old~~, `a<b`, [docs](https://e.x/a?b=1&c=2) @everyone"
    ]


@given(text=WORDS | st.text(min_size=1900, max_size=2100))
def test_plain_text_is_escaped_and_fits_one_message(text: str) -> None:
    shown = _plain(text)
    assert utf16_length(shown) <= LIMIT
    escaped = escape_markdown(text)
    if utf16_length(escaped) <= LIMIT:
        assert shown == escaped
        assert shown.replace("\\", "") == text.replace("\\", "")  # nothing but escapes added
    else:  # the beginning, cut where a reader expects it, and marked as cut
        assert shown.endswith(" …")
        assert escaped.startswith(shown.removesuffix(" …"))
