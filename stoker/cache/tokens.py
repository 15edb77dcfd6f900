"""A deterministic local tokenizer: no downloads, the same count in every process.

It is not any provider's tokenizer; it only has to be stable and roughly proportional
(one token per word piece of at most four characters, or per punctuation mark, with
the surrounding whitespace folded in; whitespace alone is no token). `"x " * n` is
exactly n tokens, which lets tests build blocks of an exact size.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stoker.wire.blocks import (
    Block,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

_TOKEN = re.compile(r"\s*(?:\w{1,4}|[^\w\s])\s*")


def count_tokens(text: str) -> int:
    """Number of tokens in `text`."""
    return len(_TOKEN.findall(text))


def split_tokens(text: str) -> list[str]:
    """The tokens themselves; they join back to `s` unless `s` is only whitespace."""
    return _TOKEN.findall(text)


def estimate_tokens(blocks: Iterable[Block]) -> int:
    """Tokens of message blocks by this tokenizer: an estimate of what a provider counts,
    good enough to price a decision before the provider says the exact figure."""
    total = 0
    for b in blocks:
        if isinstance(b, TextBlock):
            total += count_tokens(b.text)
        elif isinstance(b, ThinkingBlock):
            total += count_tokens(b.thinking)
        elif isinstance(b, ToolUseBlock):
            total += count_tokens(b.name) + count_tokens(b.input_json)
        elif isinstance(b, ToolResultBlock):
            total += count_tokens(b.content)
        elif isinstance(b, ImageBlock):  # the simulator's rule (stoker.cache.accounting)
            total += max(1, len(b.data) // 1000)
    return total
