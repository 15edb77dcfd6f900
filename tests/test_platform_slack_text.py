"""Replies as Slack mrkdwn, by generation: untrusted model output never makes a message
over the limit, loses or reorders text, or smuggles in a control sequence (`<!channel>`,
`<@U123>`) that Slack would act on."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.platforms.slack.adapter import LIMIT
from stoker.platforms.slack.markup import slack_mrkdwn
from stoker.platforms.text import render
from tests.test_platform_text import MARKDOWN, WORDS

# A `<` in a message opens a link we made from a Markdown link, or nothing: Slack reads
# anything else between < and > as a mention, a channel ping or a link of its own.
_OURS = re.compile(r"<https?://[^\s<>|\"]+\|[^<>|\n]+>")


def _unlinked(message: str) -> str:
    return _OURS.sub("", message)


@settings(max_examples=300)
@given(text=MARKDOWN | WORDS, limit=st.integers(64, 400))
def test_messages_stay_within_the_limit_and_hold_no_control_sequence(text: str, limit: int) -> None:
    for message in render(text, limit, slack_mrkdwn):
        assert len(message) <= limit
        rest = _unlinked(message)
        assert "<" not in rest, message
        assert ">" not in rest, message
        assert re.sub(r"&(amp|lt|gt);", "", rest).count("&") == 0, message


@given(text=st.text(alphabet="abc &<>'\"é😀|!@\n", max_size=600), limit=st.integers(64, 200))
def test_plain_text_survives_conversion_exactly(text: str, limit: int) -> None:
    """Every character, in order (whitespace at a cut may go: a message of only
    whitespace is not sent)."""
    messages = render(text, limit, slack_mrkdwn)
    assert html.unescape("".join(messages)).replace(" ", "").replace("\n", "") == (
        text.replace(" ", "").replace("\n", "")
    )


def test_markdown_becomes_mrkdwn() -> None:
    text = (
        "# Title\n**bold** and *it* and `a<b` and [docs](https://e.x/a?b=1&c=2) ~~old~~\n"
        "<!channel> <@U123> [x](https://a.b/*c*)"
    )
    assert render(text, LIMIT, slack_mrkdwn) == [
        "*Title*\n*bold* and _it_ and `a&lt;b` and <https://e.x/a?b=1&amp;c=2|docs> ~old~\n"
        "&lt;!channel&gt; &lt;@U123&gt; <https://a.b/*c*|x>"
    ]
