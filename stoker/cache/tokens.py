"""Token counts: OpenAI's exact encodings, and a documented estimate for Anthropic.

Which tokenizer a model uses is model data (`tokenizer` in `data/models.toml`):

* `o200k_base` / `cl100k_base`: OpenAI's byte-pair encodings, exact, from the
  `bpe-openai` wheel (GitHub's Rust BPE with the encoding files bundled; nothing is
  downloaded). An encoding costs about 0.5 s and 140 MB the first time a process counts
  with it, so it is loaded then, once (`functools.cache`), never at import.
* `estimate`: Anthropic's tokenizer is not public. The estimate is one token per word
  piece of at most four characters, or per punctuation mark, with the surrounding
  whitespace folded in (whitespace alone is no token). `"x " * n` is exactly n tokens,
  which lets tests build blocks of an exact size. Its error against Anthropic's published
  counts is in docs/provider-caching.md, "Token counts".

A `Tokenizer` counts text and splits it into pieces that join back to the text's UTF-8
bytes exactly, so prefix keys taken at any token see the exact bytes.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from stoker.cache import media_tokens as media
from stoker.cache.models import ModelInfo
from stoker.extras import require
from stoker.wire.blocks import (
    Block,
    DocumentBlock,
    ImageBlock,
    ImageRefBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

_TOKEN = re.compile(r"\s*(?:\w{1,4}|[^\w\s])\s*")
_SURROGATE = re.compile("[\ud800-\udfff]")
# bpe-openai refuses a text of a million characters and one of more than 200,000 tokens;
# a character is at most 4 tokens (one per UTF-8 byte), so longer texts go in chunks.
CHUNK = 40_000


def count_tokens(text: str) -> int:
    """Tokens of `text` by the estimate (Anthropic's stand-in; see the module docs)."""
    return len(_TOKEN.findall(text))


def split_tokens(text: str) -> list[str]:
    """The estimate's tokens; they join back to `text` unless it is only whitespace."""
    return _TOKEN.findall(text)


class Tokenizer(Protocol):
    """Counts a model's tokens. `pieces(text)` are the tokens' bytes, in order: they join
    back to `text.encode("utf-8", "surrogatepass")` exactly (one piece may end inside a
    character), and there are `count(text)` of them, except that whitespace alone is no
    token for the estimate, which then keeps it in no piece."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...

    def pieces(self, text: str) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class Estimate:
    """The estimate for models whose tokenizer is not public (see the module docs)."""

    name: str = "estimate"

    def count(self, text: str) -> int:
        return count_tokens(text)

    def pieces(self, text: str) -> list[bytes]:
        return [p.encode("utf-8", "surrogatepass") for p in split_tokens(text)]


@dataclass(frozen=True, slots=True)
class Bpe:
    """An OpenAI encoding, exact. Special-token text (`<|endoftext|>`) counts as the plain
    text it is, as the APIs treat user content. A lone surrogate (JSON allows one) is no
    UTF-8: it is its own piece, and the text either side is encoded on its own."""

    name: str
    chunk: int = CHUNK

    def count(self, text: str) -> int:
        encoding = _encoding(self.name)
        return sum(
            1 if _is_surrogate(part) else len(encoding.encode_ordinary(part))
            for part in self._parts(text)
        )

    def pieces(self, text: str) -> list[bytes]:
        encoding = _encoding(self.name)
        out: list[bytes] = []
        for part in self._parts(text):
            if _is_surrogate(part):
                out.append(part.encode("utf-8", "surrogatepass"))
            else:
                out += encoding.decode_tokens_bytes(encoding.encode_ordinary(part))
        return out

    def _parts(self, text: str) -> Iterator[str]:
        if len(text) <= self.chunk and not _SURROGATE.search(text):
            yield text
            return
        start = 0
        for match in _SURROGATE.finditer(text):
            yield from _chunks(text[start : match.start()], self.chunk)
            yield match.group()
            start = match.end()
        yield from _chunks(text[start:], self.chunk)


def _is_surrogate(part: str) -> bool:
    return len(part) == 1 and "\ud800" <= part <= "\udfff"


def _chunks(text: str, size: int) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, cut where both encodings' split
    patterns cut anyway, so the tokens are those of the whole text (see `_CUTS`)."""
    start = 0
    while len(text) - start > size:
        cut = _cut(text, start + size // 2, start + size)
        yield text[start:cut]
        start = cut
    if start < len(text) or not text:
        yield text[start:]


# Where o200k's and cl100k's split patterns always split: after a newline followed by a
# letter, before a space between two letters, and between a letter and an ASCII digit
# (either way). No alternative of either pattern matches across one: letter runs never
# take a newline, a trailing space or a digit, whitespace runs stop at a letter, digit
# runs at a letter. `[^\W\d_]` is a letter or a non-decimal numeral: `_cut` checks.
_CUTS = re.compile(r"(?<=\n)(?=[^\W\d_])|(?<=[^\W\d_])(?= [^\W\d_]|[0-9])|(?<=[0-9])(?=[^\W\d_])")


def _cut(text: str, low: int, high: int) -> int:
    """The last split point in (low, high] (see `_CUTS`), searched from the end. With
    none there (a hostile run of one character), `high`: the count may then be off by a
    token at the cut."""
    for span in (256, 4096, high - low):
        start = max(low + 1, high - span)
        found = [
            m.start()
            for m in _CUTS.finditer(text, start, high + 2)
            if m.start() <= high and _splits_at(text, m.start())
        ]
        if found:
            return found[-1]
        if start == low + 1:
            break
    return high


def _splits_at(text: str, at: int) -> bool:
    before, after = text[at - 1], text[at]
    if before == "\n":
        return after.isalpha()
    if after == " ":
        return before.isalpha() and text[at + 1 : at + 2].isalpha()
    if after in _DIGITS:
        return before.isalpha()
    return before in _DIGITS and after.isalpha()


_DIGITS = "0123456789"


@cache
def _encoding(name: str) -> Any:
    """The encoding, loaded once per process and only when first needed (~140 MB)."""
    with warnings.catch_warnings():
        # bpe-openai 0.1.4 opens its bundled files with importlib.resources.open_binary,
        # deprecated since Python 3.11; the warning is the library's, not ours.
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai  # half a second: only in a process that counts OpenAI tokens

        return bpe_openai.get_encoding(name)


ESTIMATE = Estimate()
ENCODINGS = ("o200k_base", "cl100k_base")


@cache
def tokenizer_named(name: str) -> Tokenizer:
    """The tokenizer `name` in `models.toml`: "estimate" or an OpenAI encoding."""
    if name == "estimate":
        return ESTIMATE
    if name not in ENCODINGS:
        raise ValueError(f"unknown tokenizer {name!r}: expected 'estimate' or one of {ENCODINGS}")
    # The encodings are 75 MB: they come with the `openai` extra, beside the SDK of the
    # only provider that counts with them, not with every install of the library.
    require("openai", f"counting tokens with OpenAI's {name} encoding", ("bpe_openai",))
    return Bpe(name)


def tokenizer_for(info: ModelInfo) -> Tokenizer:
    """The tokenizer the model's provider counts with (its `tokenizer` in the table)."""
    return tokenizer_named(info.tokenizer)


def estimate_tokens(blocks: Iterable[Block]) -> int:
    """Tokens of message blocks by the estimate: what a provider counts, near enough to
    price a decision before the provider says the exact figure. Images and documents
    count as on Anthropic (`stoker.cache.media_tokens`)."""
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
        elif isinstance(b, ImageBlock):
            total += media.anthropic_image(media.base64_image_size(b.data))
        elif isinstance(b, ImageRefBlock):
            total += media.anthropic_image(None)
        elif isinstance(b, DocumentBlock):
            if b.media_type.startswith("text/") and b.data:
                total += count_tokens(b.data)
            else:
                total += media.anthropic_pdf(media.base64_pdf_pages(b.data) if b.data else None)
    return total
