"""A deterministic local tokenizer: no downloads, the same count in every process.

It is not any provider's tokenizer; it only has to be stable and roughly proportional
(one token per word piece of at most four characters, or per punctuation mark, with
the surrounding whitespace folded in; whitespace alone is no token). `"x " * n` is
exactly n tokens, which lets tests build blocks of an exact size.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\s*(?:\w{1,4}|[^\w\s])\s*")


def count_tokens(text: str) -> int:
    """Number of tokens in `text`."""
    return len(_TOKEN.findall(text))


def split_tokens(text: str) -> list[str]:
    """The tokens themselves; they join back to `s` unless `s` is only whitespace."""
    return _TOKEN.findall(text)
