"""What the two OpenAI dialects share: tool specs, images, breakpoints, regrouping.

Chat Completions and Responses differ in shape but not in structure: a user turn becomes
tool outputs followed by one user message, a breakpoint is a `prompt_cache_breakpoint`
on a content part, and the history is read back by regrouping items into messages.
Each message is rendered once into items plus one `Anchor` per block (the content part a
breakpoint on that block lands on), memoized on the message; breakpoints are applied to
copies, so a marker never leaks into the memo or into the next request.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stoker.errors import WireError
from stoker.wire.blocks import (
    Block,
    DocumentBlock,
    ImageBlock,
    ImageRefBlock,
    TextBlock,
    ToolResultBlock,
)
from stoker.wire.canonical import canonical_json
from stoker.wire.dialects._chain import ChainMemo, remembered
from stoker.wire.dialects._memo import kept_on
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request

Anchor = tuple[int, str, int]  # (item index within the message's items, content key, part)
_TTL = {"5m": None, "1h": "12h"}  # Stoker's short/long TTLs are OpenAI's 30m (default) / 12h


@dataclass(frozen=True, slots=True)
class Rendered:
    """One message's wire items (never mutated once built) and one anchor per block."""

    items: list[dict[str, Any]]
    anchors: tuple[Anchor | None, ...]


def memoized(
    message: Message,
    dialect: str,
    assistant: Callable[[AssistantMessage], Rendered],
    user: Callable[[UserMessage], Rendered],
) -> Rendered:
    """`message` rendered once per dialect; the result is shared, so never mutated."""
    return kept_on(
        message,
        dialect,
        lambda: assistant(message) if isinstance(message, AssistantMessage) else user(message),
    )


def memoized_tools(
    prefix: Prefix, dialect: str, build: Callable[[str, str | None, Any], dict[str, Any]]
) -> list[dict[str, Any]]:
    """The prefix's tools, built once per prefix from their exact bytes (order kept)."""

    def specs() -> list[dict[str, Any]]:
        # json.loads keeps the canonical key order of the bytes inside the schema.
        loaded = (json.loads(raw) for raw in prefix.tools)
        return [build(s["name"], s.get("description"), s.get("input_schema")) for s in loaded]

    return kept_on(prefix, dialect, specs)


def tool_bytes(name: str, description: str | None, parameters: Any) -> bytes:
    """The canonical bytes a prefix holds for a tool read off the wire."""
    spec: dict[str, Any] = {"name": name}
    if description is not None:
        spec["description"] = description
    if parameters is not None:
        spec["input_schema"] = parameters
    return canonical_json(spec)


def tool_choice(params: CacheParams, named: Callable[[str], dict[str, Any]]) -> Any:
    """The wire `tool_choice`, or None for "auto" (the API default when tools are sent)."""
    choice = params.tool_choice
    if choice.startswith("tool:"):
        return named(choice.removeprefix("tool:"))
    wire = {"auto": None, "any": "required", "none": "none"}
    if choice not in wire:
        raise WireError(f"unknown tool_choice {choice!r}; use auto, any, none or tool:NAME")
    return wire[choice]


def parse_tool_choice(value: Any) -> str:
    """Stoker's tool_choice for either API's wire form."""
    if value is None or value == "auto":
        return "auto"
    if value in ("required", "none"):
        return "any" if value == "required" else "none"
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name") or (value.get("function") or {}).get("name")
        return f"tool:{name}"
    raise WireError(f"unsupported tool_choice {value!r}")


def tool_params(body: dict[str, Any], params: CacheParams, named: Callable[[str], Any]) -> None:
    """`tool_choice` and `parallel_tool_calls`, sent only with tools and only when not default."""
    choice = tool_choice(params, named)
    if choice is not None:
        body["tool_choice"] = choice
    # Sent only when off: o1, o3 and o4-mini reject the parameter, even as true.
    if not params.parallel_tool_calls:
        body["parallel_tool_calls"] = False


def cache_fields(body: dict[str, Any], request: Request) -> None:
    if request.cache_key is not None:
        body["prompt_cache_key"] = request.cache_key
    if request.cache_retention is not None:
        body["prompt_cache_retention"] = request.cache_retention


def arguments_text(args: Any) -> str:
    """Call arguments as the string received; a few clients send an object instead."""
    if isinstance(args, str):
        return args
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def data_url(block: ImageBlock | DocumentBlock) -> str:
    data = block.data
    if isinstance(block, DocumentBlock) and block.media_type == "text/plain":
        data = base64.b64encode(block.data.encode("utf-8")).decode("ascii")
    return f"data:{block.media_type};base64,{data}"


def _data_url_parts(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:...;base64,` URL; None for any other string."""
    head, sep, data = url.partition(",")
    if head.startswith("data:") and head.endswith(";base64") and sep:
        return head[5:-7], data
    return None


def image_from_url(url: Any, detail: Any = None, file_id: Any = None) -> ImageBlock | ImageRefBlock:
    """An inline image from a data: URL; any other URL (or a file id) is a reference,
    kept as given (OpenAI fetches it; Stoker never does)."""
    if file_id is not None and not url:
        return ImageRefBlock(file_id=_text(file_id, "file_id"), detail=_detail(detail))
    url = _text(url, "image_url")
    inline = _data_url_parts(url)
    if inline is not None:
        return ImageBlock(media_type=inline[0], data=inline[1])
    if not url.startswith(("http://", "https://")):
        raise WireError(f"image_url must be an http(s) URL or a base64 data: URL, not {url[:60]!r}")
    return ImageRefBlock(url=url, detail=_detail(detail))


def _detail(value: Any) -> str:
    if value is None:
        return ""
    if value not in ("low", "high", "auto", "original"):
        raise WireError(f"image detail must be low, high or auto, not {value!r:.40}")
    return str(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"{where} must be a string, not {type(value).__name__}")
    return value


def file_from(
    data: Any, *, url: Any = None, file_id: Any = None, name: Any = None
) -> DocumentBlock:
    """A file part of either API (`file_data` as a data URL or bare base64, a URL, an id)."""
    filename = "" if name is None else _text(name, "filename")
    if file_id is not None:
        return DocumentBlock(file_id=_text(file_id, "file_id"), name=filename)
    if url is not None:
        return DocumentBlock(url=_text(url, "file_url"), name=filename)
    if data is None:
        raise WireError("a file part needs file_data, file_url or file_id")
    inline = _data_url_parts(_text(data, "file_data"))
    if inline is None:  # bare base64: the filename says what it is
        media = "application/pdf" if filename.lower().endswith(".pdf") else ""
        return DocumentBlock(media_type=media, data=data, name=filename)
    return DocumentBlock(media_type=inline[0], data=inline[1], name=filename)


def file_fields(block: DocumentBlock, *, url_key: str | None) -> dict[str, Any]:
    """The fields of a file part for `block`; `url_key` None when the API takes no URL."""
    out: dict[str, Any] = {}
    if block.file_id:
        out["file_id"] = block.file_id
    elif block.url:
        if url_key is None:
            raise WireError("Chat Completions takes a file by its data or id, not by URL")
        out[url_key] = block.url
    else:
        out["file_data"] = data_url(block)
    if block.name:
        out["filename"] = block.name
    return out


def plain(parts: list[dict[str, Any]]) -> Any:
    """A lone text part as a plain string (what every server accepts), else the list."""
    return parts[0]["text"] if len(parts) == 1 and "text" in parts[0] else parts


def text_of(content: Any) -> str:
    """The text of a string-or-parts field (tool outputs, system prompts)."""
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def parse_parts(content: Any) -> list[Block]:
    """User content (a string or a list of parts, either API's part names) as blocks."""
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[Block] = []
    for part in content:
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            blocks.append(TextBlock(text=part["text"]))
        elif kind == "refusal":
            blocks.append(TextBlock(text=part["refusal"]))
        elif kind == "image_url":  # Chat nests the URL; some clients send it bare
            url = part["image_url"]
            if isinstance(url, dict):
                blocks.append(image_from_url(url["url"], url.get("detail")))
            else:
                blocks.append(image_from_url(url))
        elif kind == "input_image":
            blocks.append(
                image_from_url(part.get("image_url"), part.get("detail"), part.get("file_id"))
            )
        elif kind == "file":  # Chat
            file = part["file"]
            blocks.append(
                file_from(
                    file.get("file_data"), file_id=file.get("file_id"), name=file.get("filename")
                )
            )
        elif kind == "input_file":  # Responses
            blocks.append(
                file_from(
                    part.get("file_data"),
                    url=part.get("file_url"),
                    file_id=part.get("file_id"),
                    name=part.get("filename"),
                )
            )
        else:
            raise WireError(f"unsupported content part type {kind!r}")
    return blocks


def render_user(
    message: UserMessage,
    result: Callable[[ToolResultBlock], tuple[dict[str, Any], str]],
    part: Callable[[Block], dict[str, Any]],
) -> Rendered:
    """Tool outputs first (one item each), then one user message with the other blocks.

    `result` returns the output item and the key of its content. Tool results come first
    in a user turn on every provider, so the order of blocks is kept in practice.
    """
    items: list[dict[str, Any]] = []
    anchors: list[Anchor | None] = []
    parts: list[dict[str, Any]] = []
    pending: list[tuple[int, int]] = []
    for j, block in enumerate(message.content):
        if isinstance(block, ToolResultBlock):
            item, key = result(block)
            anchors.append((len(items), key, 0))
            items.append(item)
        else:
            anchors.append(None)
            pending.append((j, len(parts)))
            parts.append(part(block))
    for j, p in pending:
        anchors[j] = (len(items), "content", p)
    if parts:
        items.append({"role": "user", "content": plain(parts)})
    return Rendered(items=items, anchors=tuple(anchors))


def _mark(
    items: list[dict[str, Any]],
    at: int,
    key: str,
    part: int,
    marker: Any,
    kind: str,
    name: str = "prompt_cache_breakpoint",
) -> None:
    item = items[at]
    content = item[key]
    parts = [{"type": kind, "text": content}] if isinstance(content, str) else list(content)
    parts[part] = {**parts[part], name: marker}
    items[at] = {**item, key: parts}


def openai_marker(ttl: str) -> dict[str, str]:
    """OpenAI's `prompt_cache_breakpoint` for one of Stoker's TTLs."""
    long = _TTL[ttl]
    return {"mode": "explicit"} if long is None else {"mode": "explicit", "ttl": long}


def apply_breakpoints(
    request: Request,
    items: list[dict[str, Any]],
    *,
    system_at: int | None,
    rendered: Callable[[Message], Rendered],
    text_type: str,
    name: str = "prompt_cache_breakpoint",
    marker_of: Callable[[str], Any] = openai_marker,
) -> None:
    """Put `prompt_cache_breakpoint` markers into `items` (a fresh list), copying items
    (`name` and `marker_of` another marker on the same parts: OpenRouter's `cache_control`).

    `Breakpoint(message=None)` marks the system/developer item (skipped when there is
    none: tools cannot carry a marker). A breakpoint on a block that cannot carry one
    (a tool call, reasoning, Responses assistant text) moves back to the nearest
    markable block of the same message, caching a shorter prefix; none means no marker.
    """
    messages = request.messages
    for bp in request.breakpoints:
        marker = marker_of(bp.ttl)
        if bp.message is None:
            if system_at is not None:
                _mark(items, system_at, "content", 0, marker, text_type, name)
            continue
        if not -len(messages) <= bp.message < len(messages):
            raise WireError(f"breakpoint on message {bp.message}; there are {len(messages)}")
        index = bp.message % len(messages)
        start = len(items) - sum(len(rendered(m).items) for m in messages[index:])
        anchors = rendered(messages[index]).anchors
        if not -len(anchors) <= bp.block < len(anchors):
            raise WireError(f"breakpoint on block {bp.block} of message {index}; out of range")
        for anchor in reversed(anchors[: bp.block % len(anchors) + 1]):
            if anchor is not None:
                _mark(items, start + anchor[0], anchor[1], anchor[2], marker, text_type, name)
                break


# What one wire item reads as: the side that said it ("system" for a system or developer
# message, whose text is the value), its blocks, whether it closes its message, its role.
Event = tuple[str, Any, bool, str]


def replay(
    items: list[Any],
    event_of: Callable[[Any], Event],
    memo: ChainMemo | None,
    trusted: bool,
    tag: str,
) -> tuple[tuple[Message, ...], list[str]]:
    """Messages and system texts of wire items, each item read once per memo."""
    history = History(memo)
    system: list[str] = []
    for item in items:
        side, value, closes, _ = remembered(memo, tag, item, trusted, event_of)
        if side == "system" and history.started:
            # A system or developer message later in the conversation (both APIs take
            # them anywhere): its text is read where it stands, as part of the user side.
            history.add("user", (TextBlock(text=value),))
        elif side == "system":
            system.append(value)
        else:
            history.add(side, value, closes=closes)
    return history.finish(), system


class History:
    """Regroups wire items into messages: the inverse of rendering, for `parse_request`.

    Items of one side accumulate until the other side speaks or an item `closes` the
    message (a user message closes a user turn; a Chat assistant message its turn).
    Two user turns that render to the same items (results, then text) read back as one.
    With a memo, a message of the same blocks is built once (messages are values).
    """

    def __init__(self, memo: ChainMemo | None = None) -> None:
        self.messages: list[Message] = []
        self._role: str | None = None
        self._blocks: list[Block] = []
        self._closed = False
        self._memo = memo

    @property
    def started(self) -> bool:
        return self._role is not None or bool(self.messages)

    def add(self, role: str, blocks: Sequence[Block], *, closes: bool = False) -> None:
        if self._role != role or self._closed:
            self._flush()
        self._role = role
        self._blocks.extend(blocks)
        self._closed = closes

    def _flush(self) -> None:
        if self._role in ("user", "assistant"):
            role, blocks = self._role, tuple(self._blocks)
            message: Message | None = (
                self._memo.get((role, blocks)) if self._memo is not None else None
            )
            if message is None:
                message = (
                    UserMessage(content=blocks)
                    if role == "user"
                    else AssistantMessage(content=blocks)
                )
                if self._memo is not None:
                    self._memo.put((role, blocks), message)
            self.messages.append(message)
        self._role, self._blocks, self._closed = None, [], False

    def finish(self) -> tuple[Message, ...]:
        self._flush()
        return tuple(self.messages)
