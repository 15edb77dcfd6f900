"""A Gemini `generateContent` payload -> its units in prompt order, with prefix keys.

Gemini reads a body into protobuf before it builds the prompt, so what keys a prefix is
the content, not the bytes: the key of a unit is its JSON with sorted keys (object key
order and transport whitespace do not count, a tool call's `args` included) [inferred].
The units, in order (docs/provider-caching.md, "Gemini"):

1. the tools and the tool config, one unit;
2. the system instruction, one unit;
3. each part of each content, its role in its key.

An implicit entry can end after any unit (`implicit = "parts"` in the model table), and
an explicit cache holds the units of its own head and contents, which are the first
units of every request that names it. Token counts are the estimate (Gemini's tokenizer
is not public); images and PDFs count Gemini's documented 258 tokens per 768-px tile or
page.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

from stoker.cache import media_tokens as media
from stoker.cache.tokens import count_tokens
from stoker.wire.dialects._chain import ChainMemo, link

# [doc] Gemini image understanding: an image with both sides at most 384 px is 258
# tokens; a larger one is cut into 768 x 768 tiles of 258 tokens each. A PDF page is 258.
TILE_TOKENS = 258
SMALL_SIDE = 384
TILE_SIDE = 768


@dataclass(frozen=True, slots=True, kw_only=True)
class Unit:
    """One unit of the prompt: its key (the prefix through it), size and running total;
    `content` is the index of its content (-1 for the tools and the system instruction)."""

    key: str
    tokens: int
    cum: int
    content: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    units: tuple[Unit, ...]
    namespace: str

    @property
    def total(self) -> int:
        return self.units[-1].cum if self.units else 0


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def image_tokens(data: str) -> int:
    size = media.base64_image_size(data)
    if size is None:
        return TILE_TOKENS
    width, height = size
    if width <= SMALL_SIDE and height <= SMALL_SIDE:
        return TILE_TOKENS
    return math.ceil(width / TILE_SIDE) * math.ceil(height / TILE_SIDE) * TILE_TOKENS


def _inline_tokens(data: dict[str, Any]) -> int:
    mime, payload = str(data.get("mimeType", "")), str(data.get("data", ""))
    if mime.startswith("image/"):
        return image_tokens(payload)
    if mime.startswith("text/"):
        try:
            return count_tokens(base64.b64decode(payload).decode("utf-8", "replace"))
        except (binascii.Error, ValueError):
            return count_tokens(payload)
    pages = media.base64_pdf_pages(payload) if mime == "application/pdf" else None
    return TILE_TOKENS * min(pages or 1, media.MAX_PDF_PAGES)


def part_tokens(part: dict[str, Any]) -> int:
    """Tokens of one part by the estimate; a thought signature counts nothing [inferred]."""
    if "functionCall" in part:
        call = part["functionCall"] or {}
        return count_tokens(str(call.get("name", ""))) + count_tokens(
            canonical(call.get("args") or {})
        )
    if "functionResponse" in part:
        response = part["functionResponse"] or {}
        return count_tokens(str(response.get("name", ""))) + count_tokens(
            canonical(response.get("response") or {})
        )
    if "inlineData" in part:
        return _inline_tokens(part["inlineData"] or {})
    if "fileData" in part:
        return TILE_TOKENS
    return count_tokens(str(part.get("text", "")))


def head_tokens(tools: Any, system: Any) -> tuple[int, int]:
    declarations = [d for t in tools or () for d in (t.get("functionDeclarations") or ())]
    tool_tokens = count_tokens(canonical(declarations)) if declarations else 0
    text = "" if system is None else "".join(str(p.get("text", "")) for p in system["parts"])
    return tool_tokens, count_tokens(text)


def render(
    payload: dict[str, Any], *, model: str, scope: str, memo: ChainMemo | None = None
) -> Rendered:
    """The units of a full payload (an explicit cache's head and contents already in it).
    `memo` keeps each unit's key and size under the key before it, so a conversation's
    next request hashes and counts only its new parts."""
    namespace = link("gemini", scope, model)
    units: list[Unit] = []
    tools, config = payload.get("tools"), payload.get("toolConfig")
    system = payload.get("systemInstruction")
    tool_tokens, system_tokens = head_tokens(tools, system)
    chain, cum = namespace, 0
    if tools:
        chain = link(chain, "tools", canonical([tools, config]))
        cum += tool_tokens
        units.append(Unit(key=chain, tokens=tool_tokens, cum=cum, content=-1))
    if system is not None:
        chain = link(chain, "system", canonical(system))
        cum += system_tokens
        units.append(Unit(key=chain, tokens=system_tokens, cum=cum, content=-1))
    for index, content in enumerate(payload.get("contents") or ()):
        role = str(content.get("role") or "user")
        for part in content.get("parts") or ():
            step = (chain, role, canonical(part))
            found: tuple[str, int] | None = memo.get(step) if memo is not None else None
            if found is None:
                found = (link(chain, role, step[2]), part_tokens(part))
                if memo is not None:
                    memo.put(step, found)
            chain = found[0]
            cum += found[1]
            units.append(Unit(key=chain, tokens=found[1], cum=cum, content=index))
    return Rendered(units=tuple(units), namespace=namespace)
