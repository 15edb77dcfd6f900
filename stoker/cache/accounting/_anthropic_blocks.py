"""An Anthropic content block's size (tokens, by the rules in docs/provider-caching.md,
"Token counts"), the body its cache key hashes (the block without its markers), and what
a block switches on for the keys after it (images, citations).
"""

from __future__ import annotations

from typing import Any, Literal

from stoker.cache import media_tokens as media
from stoker.cache.tokens import count_tokens
from stoker.wire.dialects._chain import compact

Level = Literal["tools", "system", "messages"]


def _image_tokens(block: dict[str, Any]) -> int:
    """An image block: by its size when the bytes are inline, else the fixed estimate."""
    source = block.get("source") or {}
    data = source.get("data") if source.get("type") == "base64" else None
    size = media.base64_image_size(data) if isinstance(data, str) else None
    return media.anthropic_image(size)


def _document_tokens(block: dict[str, Any]) -> int:
    """A document block: plain text by its tokens, content blocks by theirs, a PDF by its
    pages (read from inline bytes, else the fixed estimate); its title and context too."""
    source = block.get("source") or {}
    kind, data = source.get("type"), source.get("data")
    extra = count_tokens(str(block.get("title") or "")) + count_tokens(
        str(block.get("context") or "")
    )
    if kind == "text":
        return extra + count_tokens(data if isinstance(data, str) else "")
    if kind == "content":
        content = source.get("content")
        if isinstance(content, str):
            return extra + count_tokens(content)
        parts = [p for p in content or () if isinstance(p, dict)]
        return extra + sum(block_tokens(p, "messages") for p in parts)
    if kind == "base64" and isinstance(data, str):
        return extra + media.anthropic_pdf(media.base64_pdf_pages(data))
    return extra + media.anthropic_pdf(None)


def block_tokens(block: dict[str, Any], level: Level) -> int:
    """Tokens of one block; the rules are listed in `stoker.cache.accounting.anthropic`."""
    if level == "tools":
        schema = block.get("input_schema")
        return (
            count_tokens(block.get("name", ""))
            + count_tokens(block.get("description", ""))
            + (count_tokens(compact(schema)) if schema is not None else 0)
        )
    kind = block.get("type")
    if kind == "text":
        return count_tokens(block.get("text", ""))
    if kind == "thinking":
        return count_tokens(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return count_tokens(block.get("data", ""))
    if kind == "tool_use":
        given = block.get("input", {})
        return count_tokens(block.get("name", "")) + count_tokens(
            given if isinstance(given, str) else compact(given)
        )
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, str):
            return count_tokens(content)
        return sum(block_tokens(part, "messages") for part in content if isinstance(part, dict))
    if kind == "image":
        return _image_tokens(block)
    if kind == "document":
        return _document_tokens(block)
    return count_tokens(compact(block))


def _hash_body(block: dict[str, Any]) -> str:
    """The block without its markers: markers are not content (a block that lost its
    marker since the last turn still hits)."""
    nested = block.get("type") == "tool_result" and isinstance(block.get("content"), list)
    if "cache_control" not in block and not nested:
        return compact(block)
    body = {k: v for k, v in block.items() if k != "cache_control"}
    if body.get("type") == "tool_result" and isinstance(body.get("content"), list):
        body["content"] = [
            {k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
            for p in body["content"]
        ]
    return compact(body)


def _has_image(blocks: Any) -> bool:
    for block in blocks if isinstance(blocks, list) else ():
        if isinstance(block, dict) and (
            block.get("type") == "image" or _has_image(block.get("content"))
        ):
            return True
    return False


def _citations_on(block: dict[str, Any]) -> bool:
    citations = block.get("citations")
    return (
        block.get("type") == "document"
        and isinstance(citations, dict)
        and bool(citations.get("enabled"))
    )
