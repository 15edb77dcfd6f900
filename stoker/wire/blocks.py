"""Content blocks: frozen values, each with a `kind` discriminator.

A block holds exactly what was sent or received. Model output in particular is never
re-serialized: `ToolUseBlock.input_json` is the argument JSON exactly as the provider
returned it (for OpenAI a string whose whitespace counts; for Anthropic an object whose
key order counts), and thinking blocks keep their signatures.

One exception, because the alternative is a session that can never be sent again: a
lone UTF-16 surrogate (what a JSON escape like `"\ud800"` decodes to) cannot be encoded
as UTF-8, so no store and no provider can take it. Text blocks, tool names, arguments
and results replace each one with U+FFFD when they are made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from stoker.errors import WireError

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (it has none, usually: then
    the very same string is returned)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _make_valid(block: Any, *names: str) -> None:
    for name in names:
        value = getattr(block, name)
        if isinstance(value, str) and _SURROGATE.search(value):
            object.__setattr__(block, name, valid_text(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    """Plain text, from the user or the model."""

    text: str
    kind: Literal["text"] = "text"

    def __post_init__(self) -> None:
        _make_valid(self, "text")


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingBlock:
    """Model reasoning; replayed verbatim with its signature so the prefix stays identical."""

    thinking: str
    signature: str = ""
    kind: Literal["thinking"] = "thinking"

    def __post_init__(self) -> None:
        _make_valid(self, "thinking")


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactedThinkingBlock:
    """Encrypted reasoning the provider returned; opaque, replayed as is."""

    data: str
    kind: Literal["redacted_thinking"] = "redacted_thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUseBlock:
    """A tool call exactly as the provider sent it; replayed byte-for-byte."""

    id: str
    name: str
    input_json: str
    kind: Literal["tool_use"] = "tool_use"

    def __post_init__(self) -> None:
        _make_valid(self, "id", "name", "input_json")

    def arguments(self) -> Any:
        """The parsed arguments; a WireError, written for the model, when they cannot be:
        invalid JSON, nesting deeper than the parser goes, a number too long to convert."""
        try:
            return json.loads(self.input_json) if self.input_json.strip() else {}
        except json.JSONDecodeError as exc:
            raise WireError(f"tool call {self.id} has invalid JSON arguments: {exc}") from exc
        except RecursionError:
            raise WireError(f"tool call {self.id}: the arguments are nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise WireError(f"tool call {self.id}: the arguments cannot be read: {exc}") from None

    def arguments_or_empty(self) -> Any:
        """The parsed arguments, in the model's own key order, or `{}` when they cannot be
        read: what the APIs that take arguments as an object (Anthropic, Bedrock, Gemini)
        are sent back, since they need an object and the call's error result has told the
        model what was wrong."""
        try:
            return self.arguments()
        except WireError:
            return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultBlock:
    """The result of one tool call, as text; `is_error` marks failures the model should see."""

    tool_use_id: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"

    def __post_init__(self) -> None:
        _make_valid(self, "tool_use_id", "content")


# What both providers take as an image block (Anthropic: "image exceeds 5 MB maximum",
# measured on the base64 text; OpenAI allows more, so Anthropic's limit is the one kept).
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_IMAGE_BYTES = MAX_IMAGE_BASE64 // 4 * 3  # the most raw bytes whose base64 fits


def image_type(data: bytes) -> str | None:
    """Which of the `IMAGE_TYPES` `data` is, by its signature; None for anything else."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageBlock:
    """An image, frozen as the base64 bytes that were first sent (never re-encoded).
    Providers take the `IMAGE_TYPES`, up to `MAX_IMAGE_BASE64` characters of data."""

    media_type: str
    data: str
    kind: Literal["image"] = "image"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRefBlock:
    """An image by reference: a URL or a provider's file id, sent as given and never
    fetched by Stoker. `detail` is OpenAI's `low` / `high` / `auto` ("" when not given).

    A kind of its own rather than a field of `ImageBlock`, so the stored fingerprints of
    inline images stay what they were."""

    url: str = ""
    file_id: str = ""
    detail: str = ""
    kind: Literal["image_ref"] = "image_ref"


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentBlock:
    """A file given to the model as content: a PDF (base64 `data`), plain text (`data` is
    the text itself, `media_type` "text/plain"), or any file by `url` or provider
    `file_id`. `name` is its filename or title. Sent exactly as given; never fetched."""

    media_type: str = ""
    data: str = ""
    url: str = ""
    file_id: str = ""
    name: str = ""
    kind: Literal["document"] = "document"


Block = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ToolResultBlock
    | ImageBlock
    | ImageRefBlock
    | DocumentBlock
)

_KINDS: dict[str, type[Any]] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "redacted_thinking": RedactedThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
    "image": ImageBlock,
    "image_ref": ImageRefBlock,
    "document": DocumentBlock,
}


def block_to_dict(block: Block) -> dict[str, Any]:
    """Stoker's neutral JSON form of a block (for storage and fingerprints)."""
    out: dict[str, Any] = {"kind": block.kind}
    for name in block.__dataclass_fields__:
        if name != "kind":
            out[name] = getattr(block, name)
    return out


def block_from_dict(data: dict[str, Any]) -> Block:
    """Inverse of `block_to_dict`."""
    kind = data.get("kind")
    cls = _KINDS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise WireError(f"unknown block kind {kind!r}; expected one of {sorted(_KINDS)}")
    fields = {k: v for k, v in data.items() if k != "kind"}
    try:
        return cls(**fields)  # type: ignore[no-any-return]
    except TypeError as exc:
        raise WireError(f"bad {kind} block {data!r}: {exc}") from exc
