"""Memos that make a resent body cheap to read again: they must give exactly what a
fresh read gives, whatever the content."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from stoker.proxy.optimize import encode
from stoker.wire.dialects import anthropic
from stoker.wire.dialects._chain import ChainMemo
from tests.proxy_helpers import SYSTEM, TOOLS


def _body(texts: list[str]) -> dict[str, Any]:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages,
    }


def test_a_resent_body_reuses_what_was_read_and_equals_a_fresh_read() -> None:
    memo = ChainMemo()
    raw = json.dumps(_body(["Hello", "Hi!", "And now?"]))
    first = anthropic.parse_request(json.loads(raw), memo=memo)
    again = anthropic.parse_request(json.loads(raw), memo=memo)  # new objects, same content
    fresh = anthropic.parse_request(json.loads(raw))
    assert again == fresh
    assert again.prefix is first.prefix  # tools and system were not hashed again
    assert all(a is b for a, b in zip(again.messages, first.messages, strict=True))
    other = anthropic.parse_request(
        json.loads(raw.replace("claude-sonnet-4-6", "claude-opus-4-6")), memo=memo
    )
    assert other.prefix is not first.prefix
    assert other.prefix.params.model == "claude-opus-4-6"


ANY_TEXT = st.text(st.characters(exclude_categories=()), min_size=1)  # surrogates too


@given(st.lists(ANY_TEXT, min_size=1, max_size=6))
@example(["lone \ud800 surrogate", "ok"])
def test_any_text_is_read_the_same_through_the_memo(texts: list[str]) -> None:
    """Lone surrogates included: they have no UTF-8 form, and the memo keys them by text."""
    memo = ChainMemo()
    body = _body(texts)
    for _ in range(2):
        assert anthropic.parse_request(
            json.loads(json.dumps(body)), memo=memo
        ) == anthropic.parse_request(body)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
@example("lone \udfff surrogate")
def test_a_rewritten_body_reads_back_as_the_payload(value: Any) -> None:
    assert json.loads(encode({"x": value})) == {"x": value}
