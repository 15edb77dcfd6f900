"""Anthropic request payload -> blocks in render order, with prefix keys and breakpoints.

Rendering follows reference section 1.11: tools, then system, then message content
blocks, each hashed cumulatively; system-level switches salt the prefix at the first
system block and message-level switches at the first message block. It also validates
the breakpoints the way the Messages API does, raising `InvalidRequest` (HTTP 400).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from stoker.cache.accounting._hashing import chain, compact
from stoker.cache.models import ModelInfo
from stoker.cache.tokens import count_tokens
from stoker.errors import InvalidRequest

Level = Literal["tools", "system", "messages"]
MAX_BREAKPOINTS = 4
_THINKING = ("thinking", "redacted_thinking")
_TOOL_RUN_KINDS = ("tool_use", "tool_result")


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One rendered block: its kind, size, and the key of the prefix ending at it."""

    level: Level
    kind: str
    tokens: int
    cum: int
    key: str
    path: str
    empty: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Marker:
    """A breakpoint: the index of the block it ends at and its TTL."""

    index: int
    ttl: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    """A payload in render order. `runs` are lookback positions (lists of block indices)."""

    blocks: tuple[Block, ...]
    markers: tuple[Marker, ...]
    runs: tuple[tuple[int, ...], ...]
    run_of: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Raw:
    level: Level
    path: str
    block: dict[str, Any]
    role: str | None = None
    message: int = -1


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, provider="anthropic")


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _raw_blocks(payload: dict[str, Any]) -> list[_Raw]:
    raw: list[_Raw] = []
    for i, tool in enumerate(payload.get("tools") or ()):
        # Deferred tools are not rendered into the prefix; tool search appends them inline.
        if isinstance(tool, dict) and not tool.get("defer_loading"):
            raw.append(_Raw(level="tools", path=f"tools.{i}", block=tool))
    system = payload.get("system")
    if isinstance(system, str):
        if system:
            raw.append(_Raw(level="system", path="system", block=_text_block(system)))
    elif system:
        for i, block in enumerate(system):
            raw.append(_Raw(level="system", path=f"system.{i}", block=_as_dict(block, "system")))
    messages = payload.get("messages")
    if not isinstance(messages, list):
        raise _invalid("messages: Field required (a list of messages)")
    for m, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise _invalid(f"messages.{m}: each message needs a `role` and `content`")
        content = message.get("content", "")
        blocks = [_text_block(content)] if isinstance(content, str) else content
        for b, block in enumerate(blocks):
            path = f"messages.{m}.content.{b}"
            raw.append(
                _Raw(
                    level="messages",
                    path=path,
                    block=_as_dict(block, path),
                    role=message["role"],
                    message=m,
                )
            )
    return raw


def _as_dict(block: Any, path: str) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise _invalid(f"{path}: Input should be a valid dictionary")
    return block


def _marker_of(raw: _Raw) -> str | None:
    """The TTL of the block's explicit `cache_control`, after the API's own checks."""
    marker = raw.block.get("cache_control")
    if marker is None:
        return None
    kind = raw.block.get("type")
    if kind in _THINKING:
        raise _invalid(f"{raw.path}.{kind}: cache_control cannot be set on {kind} blocks")
    if kind == "text" and raw.level != "tools" and raw.block.get("text") == "":
        raise _invalid(f"{raw.path}.text: cache_control cannot be set for empty text blocks")
    ttl = marker.get("ttl", "5m") if isinstance(marker, dict) else None
    if ttl not in ("5m", "1h"):
        raise _invalid(f"{raw.path}.cache_control.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _strip_thinking(raw: list[_Raw], messages: list[Any]) -> list[_Raw]:
    """Drop thinking of assistant turns that precede the latest real user turn.

    Models with `strips_thinking` (earlier Opus/Sonnet, all Haiku) remove those blocks
    from the prompt when a user message with content other than tool results follows, so
    the prefix changes from the first dropped block.
    """
    last_turn = -1
    for m, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") == "user" and (
            isinstance(content, str)
            or any(isinstance(b, dict) and b.get("type") != "tool_result" for b in content or ())
        ):
            last_turn = m
    return [
        r
        for r in raw
        if not (
            r.role == "assistant" and r.message < last_turn and r.block.get("type") in _THINKING
        )
    ]


def _image_tokens(block: dict[str, Any]) -> int:
    source = block.get("source") or {}
    data = source.get("data") or source.get("url") or ""
    return max(1, len(data) // 1000)


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
        source = block.get("source") or {}
        if source.get("type") == "text":
            return count_tokens(source.get("data", ""))
        return _image_tokens(block)
    return count_tokens(compact(block))


def _hash_body(block: dict[str, Any]) -> str:
    """The block without its markers: markers are not content (a block that lost its
    marker since the last turn still hits)."""
    body = {k: v for k, v in block.items() if k != "cache_control"}
    if body.get("type") == "tool_result" and isinstance(body.get("content"), list):
        body["content"] = [
            {k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
            for p in body["content"]
        ]
    return compact(body)


def _has_image(payload: dict[str, Any]) -> bool:
    def walk(blocks: Any) -> bool:
        for block in blocks if isinstance(blocks, list) else ():
            if isinstance(block, dict) and (
                block.get("type") == "image" or walk(block.get("content"))
            ):
                return True
        return False

    return walk(payload.get("system")) or any(
        walk(m.get("content")) for m in payload.get("messages") or () if isinstance(m, dict)
    )


def _citations_on(payload: dict[str, Any]) -> bool:
    return any(
        block.get("type") == "document"
        and isinstance(block.get("citations"), dict)
        and bool(block["citations"].get("enabled"))
        for message in payload.get("messages") or ()
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _salts(payload: dict[str, Any], info: ModelInfo) -> tuple[str, str, str]:
    """(namespace extra, SYS_SALT, MSG_SALT) as canonical strings."""
    thinking = [payload.get("thinking"), (payload.get("output_config") or {}).get("effort")]
    tool_types = [str(t.get("type", "")) for t in payload.get("tools") or () if isinstance(t, dict)]
    system_salt = compact(
        [
            any(t.startswith("web_search") for t in tool_types),
            any(t.startswith("web_fetch") for t in tool_types),
            _citations_on(payload),
            payload.get("speed"),
        ]
    )
    message_salt = [payload.get("tool_choice"), _has_image(payload)]
    if not info.renders_thinking_before_tools:
        message_salt += thinking
    namespace = compact(thinking) if info.renders_thinking_before_tools else ""
    return namespace, system_salt, compact(message_salt)


def render(
    payload: dict[str, Any], info: ModelInfo, *, workspace: str, collapse_tool_runs: bool
) -> Rendered:
    """Blocks, keys and validated breakpoints of `payload` (raises `InvalidRequest`)."""
    raw = _raw_blocks(payload)
    explicit = {r.path: ttl for r in raw if (ttl := _marker_of(r)) is not None}
    if info.strips_thinking:
        raw = _strip_thinking(raw, payload["messages"])
    extra, system_salt, message_salt = _salts(payload, info)
    h = chain("anthropic", workspace, str(payload.get("model")), extra)
    blocks: list[Block] = []
    markers: list[Marker] = []
    cum = 0
    previous: _Raw | None = None
    for i, r in enumerate(raw):
        if r.level != "tools" and (previous is None or previous.level == "tools"):
            h = chain(h, "system-salt", system_salt)
        if r.level == "messages" and (previous is None or previous.level != "messages"):
            h = chain(h, "message-salt", message_salt)
        # [inferred] a role change is rendered as a turn boundary; consecutive messages of
        # one role are merged by the API, so only a change of role enters the key.
        if r.level == "messages" and (previous is None or previous.role != r.role):
            h = chain(h, "role", str(r.role))
        h = chain(h, _hash_body(r.block))
        tokens = block_tokens(r.block, r.level)
        cum += tokens
        kind = "tool" if r.level == "tools" else str(r.block.get("type"))
        empty = kind == "text" and r.block.get("text") == ""
        blocks.append(
            Block(level=r.level, kind=kind, tokens=tokens, cum=cum, key=h, path=r.path, empty=empty)
        )
        if r.path in explicit:
            markers.append(Marker(index=i, ttl=explicit[r.path]))
        previous = r
    markers = _with_automatic(payload, blocks, markers)
    _validate(markers)
    runs, run_of = _positions(blocks, collapse_tool_runs)
    return Rendered(blocks=tuple(blocks), markers=tuple(markers), runs=runs, run_of=run_of)


def _with_automatic(
    payload: dict[str, Any], blocks: list[Block], markers: list[Marker]
) -> list[Marker]:
    """Add the top-level `cache_control` breakpoint on the last cacheable block."""
    auto = payload.get("cache_control")
    if auto is None:
        return markers
    ttl = auto.get("ttl", "5m") if isinstance(auto, dict) else None
    if ttl not in ("5m", "1h"):
        raise _invalid("cache_control.ttl: Input should be '5m' or '1h'")
    target = next(
        (i for i in range(len(blocks) - 1, -1, -1) if not _skipped_by_auto(blocks[i])), None
    )
    if target is None:
        return markers  # nothing eligible: caching is skipped silently
    for m in markers:
        if m.index == target:
            if m.ttl == ttl:
                return markers
            raise _invalid(
                f"The top-level cache_control (ttl='{ttl}') would be applied to "
                f"{blocks[target].path}, which already has cache_control with ttl='{m.ttl}'. "
                "Use the same ttl or remove one of them."
            )
    return sorted([*markers, Marker(index=target, ttl=ttl)], key=lambda m: m.index)


def _skipped_by_auto(block: Block) -> bool:
    return block.kind in _THINKING or block.empty


def _validate(markers: list[Marker]) -> None:
    if len(markers) > MAX_BREAKPOINTS:
        raise _invalid(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(markers)}."
        )
    seen_short = False
    for m in markers:
        if m.ttl == "5m":
            seen_short = True
        elif seen_short:
            raise _invalid(
                "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control "
                "block. Note that blocks are processed in the following order: `tools`, "
                "`system`, `messages`."
            )


def _positions(
    blocks: list[Block], collapse: bool
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Lookback positions: each maximal run of tool_use (or tool_result) blocks is one."""
    runs: list[list[int]] = []
    run_of: list[int] = []
    for i, block in enumerate(blocks):
        same_run = (
            collapse
            and runs
            and block.level == "messages"
            and block.kind in _TOOL_RUN_KINDS
            and blocks[i - 1].kind == block.kind
            and blocks[i - 1].level == "messages"
        )
        if same_run:
            runs[-1].append(i)
        else:
            runs.append([i])
        run_of.append(len(runs) - 1)
    return tuple(tuple(r) for r in runs), tuple(run_of)
