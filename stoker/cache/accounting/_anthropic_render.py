"""Anthropic request payload -> blocks in render order, with prefix keys and breakpoints.

Rendering follows docs/provider-caching.md, "Anthropic render order": tools, then
system, then message content blocks, each hashed cumulatively; system-level switches
salt the keys of system and message blocks, message-level switches those of message
blocks. It also validates the breakpoints the way the Messages API does, raising
`InvalidRequest` (HTTP 400).

A block's size, kind and place depend only on the prefix up to it, so each is computed
once per prefix and found again in a `ChainMemo`: a call costs its new blocks, a lookup
per old one, and a key (one hash) per block the lookback actually checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stoker.cache.accounting._anthropic_blocks import (
    Level,
    _citations_on,
    _has_image,
    _hash_body,
    block_tokens,
)
from stoker.cache.models import ModelInfo
from stoker.errors import InvalidRequest
from stoker.wire.dialects._chain import ChainMemo, compact, link

MAX_BREAKPOINTS = 4
_THINKING = ("thinking", "redacted_thinking")
_TOOL_RUN_KINDS = ("tool_use", "tool_result")


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One rendered block: its kind, size and place, memoized under `chain`.

    `chain` is the content chain through this block (every earlier block, level and role
    change, and this block's body); everything else here follows from it, so the same
    value serves every request that shares the prefix. The cache key adds the request's
    salts (`Rendered.key`). `run_start` is the first block of its lookback position;
    `images` / `citations` say whether any block up to here has one (the salts need them).
    """

    level: Level
    kind: str
    tokens: int
    cum: int
    chain: str
    index: int
    run_start: int
    empty: bool = False
    images: bool = False
    citations: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Marker:
    """A breakpoint: the index of the block it ends at and its TTL."""

    index: int
    ttl: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    """A payload in render order, and the key root of each level (namespace plus salts)."""

    blocks: tuple[Block, ...]
    markers: tuple[Marker, ...]
    roots: dict[Level, str]

    def key(self, index: int) -> str:
        """The cache key of the prefix ending at block `index`."""
        block = self.blocks[index]
        return link(self.roots[block.level], block.chain)

    def positions(self, index: int) -> Iterator[list[int]]:
        """Lookback positions from block `index` back to the first block, nearest first,
        each as block indices last-first. A breakpoint inside a run of tool_use (or
        tool_result) blocks starts at itself, so the rest of the run is not checked."""
        end = index
        while end >= 0:
            start = self.blocks[end].run_start
            yield list(range(end, start - 1, -1))
            end = start - 1


# Where a block came from: (level, role, message or tool index, block index or None for a
# string system prompt, the block). A plain tuple: one is made per block per request.
Source = tuple[Level, str | None, int, int | None, dict[str, Any]]


def _path(source: Source) -> str:
    level, _, message, part, _ = source
    if level == "tools":
        return f"tools.{message}"
    if level == "system":
        return "system" if part is None else f"system.{part}"
    return f"messages.{message}.content.{part}"


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, provider="anthropic")


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _head(payload: dict[str, Any]) -> Iterator[Source]:
    """Tools, then system blocks."""
    for i, tool in enumerate(payload.get("tools") or ()):
        # Deferred tools are not rendered into the prefix; tool search appends them inline.
        if isinstance(tool, dict) and not tool.get("defer_loading"):
            yield ("tools", None, i, -1, tool)
    system = payload.get("system")
    if isinstance(system, str):
        if system:
            yield ("system", None, -1, None, _text_block(system))
    elif system:
        for i, block in enumerate(system):
            yield ("system", None, -1, i, _as_dict(block, f"system.{i}"))


def _messages(payload: dict[str, Any]) -> list[Any]:
    messages = payload.get("messages")
    if not isinstance(messages, list):
        raise _invalid("messages: Field required (a list of messages)")
    return messages


def _message_sources(m: int, message: Any) -> Iterator[Source]:
    if not isinstance(message, dict) or "role" not in message:
        raise _invalid(f"messages.{m}: each message needs a `role` and `content`")
    content = message.get("content", "")
    role = message["role"]
    if isinstance(content, str):
        yield ("messages", role, m, 0, _text_block(content))
        return
    for b, block in enumerate(content):
        if not isinstance(block, dict):
            _as_dict(block, f"messages.{m}.content.{b}")
        yield ("messages", role, m, b, block)


def _as_dict(block: Any, path: str) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise _invalid(f"{path}: Input should be a valid dictionary")
    return block


def _marker_of(source: Source) -> str | None:
    """The TTL of the block's explicit `cache_control`, after the API's own checks."""
    level, _, _, _, block = source
    marker = block.get("cache_control")
    if marker is None:
        return None
    kind = block.get("type")
    if kind in _THINKING:
        raise _invalid(f"{_path(source)}.{kind}: cache_control cannot be set on {kind} blocks")
    if kind == "text" and level != "tools" and block.get("text") == "":
        raise _invalid(f"{_path(source)}.text: cache_control cannot be set for empty text blocks")
    ttl = marker.get("ttl", "5m") if isinstance(marker, dict) else None
    if ttl not in ("5m", "1h"):
        raise _invalid(f"{_path(source)}.cache_control.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _latest_turn(messages: list[Any]) -> int:
    """Index of the latest user message with content other than tool results (or -1).

    Models with `strips_thinking` (earlier Opus/Sonnet, all Haiku) remove the thinking of
    assistant turns before it from the prompt, so the prefix changes from the first
    dropped block.
    """
    for m in range(len(messages) - 1, -1, -1):
        message = messages[m]
        content = message.get("content")
        if message.get("role") == "user" and (
            isinstance(content, str)
            or any(isinstance(b, dict) and b.get("type") != "tool_result" for b in content or ())
        ):
            return m
    return -1


def _roots(
    payload: dict[str, Any], info: ModelInfo, workspace: str, last: Block | None
) -> dict[Level, str]:
    """The key root of each level: the namespace, then salted for system, then again for
    messages (docs/provider-caching.md, "Anthropic simulator").

    Salting the root instead of the chain at the level's first block gives keys that are
    equal exactly when the chained ones were, and keeps the content chain salt-free.
    """
    thinking = [payload.get("thinking"), (payload.get("output_config") or {}).get("effort")]
    tool_types = [str(t.get("type", "")) for t in payload.get("tools") or () if isinstance(t, dict)]
    system_salt = compact(
        [
            any(t.startswith("web_search") for t in tool_types),
            any(t.startswith("web_fetch") for t in tool_types),
            last is not None and last.citations,
            payload.get("speed"),
        ]
    )
    message_salt = [payload.get("tool_choice"), last is not None and last.images]
    if not info.renders_thinking_before_tools:
        message_salt += thinking
    extra = compact(thinking) if info.renders_thinking_before_tools else ""
    namespace = link("anthropic", workspace, info.name, extra)
    system = link(namespace, "system-salt", system_salt)
    return {
        "tools": namespace,
        "system": system,
        "messages": link(system, "message-salt", compact(message_salt)),
    }


def _new_block(source: Source, chain: str, previous: Block | None, collapse: bool) -> Block:
    level, _, _, _, block = source
    tokens = block_tokens(block, level)
    kind = "tool" if level == "tools" else str(block.get("type"))
    index = previous.index + 1 if previous is not None else 0
    same_run = (
        collapse
        and previous is not None
        and level == "messages"
        and kind in _TOOL_RUN_KINDS
        and previous.kind == kind
        and previous.level == "messages"
    )
    images = previous is not None and previous.images
    citations = previous is not None and previous.citations
    return Block(
        level=level,
        kind=kind,
        tokens=tokens,
        cum=(previous.cum if previous is not None else 0) + tokens,
        chain=chain,
        index=index,
        run_start=previous.run_start if same_run and previous is not None else index,
        empty=kind == "text" and block.get("text") == "",
        images=images or (level != "tools" and _has_image([block])),
        citations=citations or (level == "messages" and _citations_on(block)),
    )


_RESUME = "resume"  # where a workspace's memo keeps a conversation's last trusted render


def _resume_key(messages: list[Any]) -> tuple[str, int | None]:
    """Where the last render of the conversation that `messages` continues is kept: under
    its first message object, so the interleaved conversations of a gateway's sessions
    each resume their own (one slot for all made every request of a busy gateway walk its
    whole history again). The render kept there holds that object, so its `id` is not
    reused while the entry lives, and `_resumed` checks every message's identity anyway."""
    return (_RESUME, id(messages[0]) if messages else None)


@dataclass(slots=True, kw_only=True)
class _Walk:
    """A render in progress: the blocks so far and the state the next block depends on.
    Saved after each message of a trusted render, so a request that repeats the same
    message objects first resumes after them instead of walking them again."""

    blocks: list[Block]
    sources: list[Source]
    markers: list[Marker]
    chain: str = ""
    turn: tuple[str, str | None] = ("tools", None)

    def mark(self) -> tuple[int, int, str, tuple[str, str | None]]:
        return (len(self.blocks), len(self.markers), self.chain, self.turn)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Resume:
    head: tuple[Any, ...]  # the tools and system blocks
    messages: tuple[Any, ...]  # the message objects, held likewise
    ids: list[int]
    marks: tuple[tuple[int, int, str, tuple[str, str | None]], ...]  # after the head, each message
    walk: _Walk


def _resumed(
    resume: _Resume | None, head: tuple[Any, ...], messages: list[Any]
) -> tuple[_Walk, int, list[tuple[int, int, str, tuple[str, str | None]]]] | None:
    """The walk after the longest run of leading messages that are the very objects of the
    last render (with the same tools and system), and how many messages that covers."""
    if resume is None or head != resume.head:  # few objects; equal content is enough
        return None
    n = min(len(messages), len(resume.ids))
    ids = list(map(id, messages[:n]))
    if ids != resume.ids[:n]:
        n = next(i for i, (a, b) in enumerate(zip(ids, resume.ids, strict=False)) if a != b)
    blocks, markers, chain, turn = resume.marks[n]
    walk = resume.walk
    return (
        _Walk(
            blocks=walk.blocks[:blocks],
            sources=walk.sources[:blocks],
            markers=walk.markers[:markers],
            chain=chain,
            turn=turn,
        ),
        n,
        list(resume.marks[: n + 1]),
    )


def render(
    payload: dict[str, Any],
    info: ModelInfo,
    *,
    workspace: str,
    collapse_tool_runs: bool,
    memo: ChainMemo,
    trusted: bool = False,
) -> Rendered:
    """Blocks, keys and validated breakpoints of `payload` (raises `InvalidRequest`).

    Blocks seen before after the same prefix come from `memo`: by identity when the
    caller vouches that the payload is never mutated (`trusted`), else by content. A
    trusted request that extends the last one starts where that one's shared part ended.
    """
    messages = _messages(payload)
    strip_before = _latest_turn(messages) if info.strips_thinking else -1
    head_sources = list(_head(payload))
    head = tuple(source[4] for source in head_sources)
    resumable = trusted and strip_before < 0
    found = _resumed(memo.get(_resume_key(messages)), head, messages) if resumable else None
    if found is None:
        walk, start = _Walk(blocks=[], sources=[], markers=[]), 0
        for source in head_sources:
            _step_block(walk, source, memo, trusted, collapse_tool_runs)
        marks = [walk.mark()]
    else:
        walk, start, marks = found
    for m in range(start, len(messages)):
        for source in _message_sources(m, messages[m]):
            if source[1] == "assistant" and m < strip_before and source[4].get("type") in _THINKING:
                _marker_of(source)  # dropped from the prompt, but still validated
                continue
            _step_block(walk, source, memo, trusted, collapse_tool_runs)
        marks.append(walk.mark())
    if resumable:
        memo.put(
            _resume_key(messages),
            _Resume(
                head=head,
                messages=tuple(messages),
                ids=list(map(id, messages)),
                marks=tuple(marks),
                walk=walk,
            ),
        )
    blocks, sources = walk.blocks, walk.sources
    markers = _with_automatic(payload, blocks, sources, list(walk.markers))
    _validate(markers)
    roots = _roots(payload, info, workspace, blocks[-1] if blocks else None)
    return Rendered(blocks=tuple(blocks), markers=tuple(markers), roots=roots)


def _step_block(
    walk: _Walk, source: Source, memo: ChainMemo, trusted: bool, collapse_tool_runs: bool
) -> None:
    """Add one block to the walk: found in `memo` after the same chain, or made."""
    level, role, _, _, raw = source
    chain = walk.chain
    # [inferred] a role change is rendered as a turn boundary; consecutive messages of
    # one role are merged by the API, so only a change of role enters the key.
    change = (level, role) if (level, role) != walk.turn else None
    known = memo.known((chain, change), raw, trusted)
    if known is not None:
        _, block, ttl = known
    else:
        ttl = _marker_of(source)
        before = chain
        if change is not None:
            chain = _step(memo, chain, f"{level}|{role}")
        after = link(chain, _hash_body(raw))
        block = memo.get(after)
        if block is None:
            previous = walk.blocks[-1] if walk.blocks else None
            block = _new_block(source, after, previous, collapse_tool_runs)
            memo.put(after, block)
        memo.remember((before, change), raw, trusted, block, ttl)
    walk.turn = (level, role)
    if ttl is not None:
        walk.markers.append(Marker(index=block.index, ttl=ttl))
    walk.blocks.append(block)
    walk.sources.append(source)
    walk.chain = block.chain


def _step(memo: ChainMemo, chain: str, part: str) -> str:
    """`link(chain, part)` for a short structural part, memoized (it recurs every turn)."""
    after: str | None = memo.get((chain, part))
    if after is None:
        after = link(chain, part)
        memo.put((chain, part), after)
    return after


def _with_automatic(
    payload: dict[str, Any], blocks: list[Block], sources: list[Source], markers: list[Marker]
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
                f"{_path(sources[target])}, which already has cache_control with ttl='{m.ttl}'. "
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
