"""A Gemini `generateContent` payload -> its units in prompt order, with prefix keys.

Gemini reads a body into protobuf before it builds the prompt, so what keys a prefix is
the content, not the bytes: the key of a unit is its JSON with sorted keys (object key
order and transport whitespace do not count, a tool call's `args` included) [inferred].
The units, in order (docs/provider-caching.md, "Gemini"):

1. the tools and the tool config, one unit;
2. the system instruction, one unit;
3. each part of each content, its role in its key.

The system instruction and each text part are cut where the prompt crosses a multiple of
`grid` tokens (the model table's `unit`), so their pieces are units too.

An implicit entry can end after any unit (`implicit = "parts"` in the model table), and
an explicit cache holds the units of its own head and contents, which are the first
units of every request that names it. Google documents the implicit cache as keyed on
the prompt's prefix ("put large and common contents at the beginning of your prompt"):
one text part holding a long document and then a question shares the document's
pieces with the next part of that document and another question [inferred: the grid's
size is not published]. A piece's key is its text after the key before it, so the same
document reads the same keys whatever follows it; the part's last unit is keyed on the
whole part (with a thought signature or any other field it carries).

Token counts are the estimate (Gemini's tokenizer is not public); images and PDFs count
Gemini's documented 258 tokens per 768-px tile or page.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

from stoker.cache import media_tokens as media
from stoker.cache.tokens import count_tokens, split_tokens
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
    part: int  # the index of the whole unit it belongs to (tools, system, a part)


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


Pieces = tuple[tuple[str, int], ...]  # (key, tokens) of a part's units, in order


def pieces(
    chain: str, role: str, whole: str, text: str | None, tokens: int, *, cum: int, grid: int
) -> Pieces:
    """The units of one part (`whole`, its canonical JSON, of `tokens` tokens) after the
    prefix `chain` of `cum` tokens: its `text` cut where the prompt crosses a multiple of
    `grid` tokens; a part with no text (a call, a result, an image) whole."""
    if text is None or grid < 1 or (cum % grid) + tokens <= grid:
        return ((link(chain, role, whole), tokens),)
    split = split_tokens(text)
    out: list[tuple[str, int]] = []
    start = 0
    for end in range(grid - cum % grid, len(split), grid):
        chain = link(chain, role, "text-piece", "".join(split[start:end]))
        out.append((chain, end - start))
        start = end
    out.append((link(chain, role, whole), len(split) - start))
    return tuple(out)


def render(
    payload: dict[str, Any],
    *,
    model: str,
    scope: str,
    memo: ChainMemo | None = None,
    grid: int = 0,
) -> Rendered:
    """The units of a full payload (an explicit cache's head and contents already in it);
    text parts cut every `grid` tokens of the prompt (0: parts whole). `memo` keeps each
    part's units under the key before it, so a conversation's next request hashes and
    counts only its new parts."""
    namespace = link("gemini", scope, model)
    units: list[Unit] = []
    tools, config = payload.get("tools"), payload.get("toolConfig")
    system = payload.get("systemInstruction")
    tool_tokens, system_tokens = head_tokens(tools, system)
    chain, cum, whole = namespace, 0, 0
    if tools:
        chain = link(chain, "tools", canonical([tools, config]))
        cum += tool_tokens
        units.append(Unit(key=chain, tokens=tool_tokens, cum=cum, content=-1, part=whole))
        whole += 1
    if system is not None:
        joined = "".join(str(p.get("text", "")) for p in system["parts"])
        cut = pieces(chain, "system", canonical(system), joined, system_tokens, cum=cum, grid=grid)
        for key, tokens in cut:
            cum += tokens
            units.append(Unit(key=key, tokens=tokens, cum=cum, content=-1, part=whole))
        chain = cut[-1][0]
        whole += 1
    for index, content in enumerate(payload.get("contents") or ()):
        role = str(content.get("role") or "user")
        for part in content.get("parts") or ():
            step = (chain, role, canonical(part), grid)
            found: Pieces | None = memo.get(step) if memo is not None else None
            if found is None:
                text = part.get("text")
                said = text if isinstance(text, str) else None
                found = pieces(chain, role, step[2], said, part_tokens(part), cum=cum, grid=grid)
                if memo is not None:
                    memo.put(step, found)
            for key, tokens in found:
                cum += tokens
                units.append(Unit(key=key, tokens=tokens, cum=cum, content=index, part=whole))
            chain = found[-1][0]
            whole += 1
    return Rendered(units=tuple(units), namespace=namespace)
