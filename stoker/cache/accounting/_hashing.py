"""Prefix keys: chained SHA-256 over canonical bytes, so equal prefixes get equal keys.

Providers key a cache entry by "a cryptographic hash of the prompt up to the breakpoint".
We cannot know their bytes, only that the key is cumulative and that it sees object key
order and exact strings; these helpers give exactly that and nothing more.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def compact(value: Any) -> str:
    """JSON as a server re-serializes a parsed body: no transport whitespace, key order kept.

    Key order is never sorted: Anthropic documents that a reordered `tool_use` input
    breaks the cache, so order is part of the content.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def chain(previous: str, *parts: str) -> str:
    """The key of `previous` extended by `parts` (length-prefixed, so no two splits collide)."""
    h = hashlib.sha256(_encode(previous))
    for part in parts:
        data = _encode(part)
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def token_stream_keys(
    namespace: str, segments: list[tuple[str, tuple[str, ...]]], positions: set[int]
) -> dict[int, str]:
    """Keys of token prefixes: for each position p, a hash of the first p tokens.

    Each segment is (header, tokens); the header holds what the segment contains beyond
    its counted tokens (role, ids, structure) and is hashed just before its first token,
    so a key at p covers every segment that started before p. One running hash is copied
    at each wanted position, which keeps a 100k-token prompt at one pass.
    """
    h = hashlib.sha256(_encode(namespace))
    wanted = sorted(positions)
    out: dict[int, str] = {}
    w = 0
    pos = 0
    for header, tokens in segments:
        data = _encode(header)
        h.update(b"H" + len(data).to_bytes(8, "big") + data)
        end = pos + len(tokens)
        start = 0
        while w < len(wanted) and wanted[w] <= end:
            cut = wanted[w] - pos
            if cut > 0:
                h.update(_pack(tokens[start:cut]))
                start = cut
                out[wanted[w]] = h.copy().hexdigest()
            w += 1
        h.update(_pack(tokens[start:]))
        pos = end
    return out


def _pack(tokens: tuple[str, ...]) -> bytes:
    parts = []
    for token in tokens:
        data = _encode(token)
        parts.append(b"T" + len(data).to_bytes(4, "big") + data)
    return b"".join(parts)
