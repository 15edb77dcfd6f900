"""OpenAI request payload (Chat Completions or Responses) -> a token stream with boundaries.

Render order is hidden tokens -> tools -> instructions / system / developer -> input
items, then the reply's priming (docs/provider-caching.md, "OpenAI simulator"). Each
tool, message part, call and output is one segment: a header (role, ids, structure)
plus its tokens, counted as OpenAI counts them (`_openai_counts`, with the model's
encoding). Text tokens are kept as their bytes, which join back exactly, so prefix keys
see exact strings, and a key can be taken at any token (regime L's grid) or at a
message end (regime N).

Each unit (tool, instructions, message or item) is rendered once per prefix and found
again in a `ChainMemo`, segments and their keys included: a call costs its new units, a
lookup per old one, and one pass over the tokens of the segments keys are taken inside.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import stoker.cache.accounting._openai_counts as counts
from stoker.cache.accounting._openai_counts import Token
from stoker.cache.tokens import Tokenizer
from stoker.errors import InvalidRequest
from stoker.wire.dialects._chain import ChainMemo, compact, link

Api = Literal["chat", "responses"]
ItemKind = Literal["dev", "user", "assistant", "call", "output", "other"]
_TEXT_PARTS = ("text", "input_text", "output_text")
_IMAGE_PARTS = ("image_url", "input_image")
_FILE_PARTS = ("file", "input_file")
_ROLE_KIND: dict[str, ItemKind] = {
    "system": "dev",
    "developer": "dev",
    "user": "user",
    "assistant": "assistant",
    "tool": "output",
}
_RETENTION = {"in_memory": "in_memory", "in-memory": "in_memory", "24h": "24h"}


def extend(chain: str, header: str, tokens: Iterable[Token]) -> str:
    """The key after a segment (or its first tokens): header, then each token, framed."""
    h = hashlib.sha256(chain.encode("utf-8", "surrogatepass"))
    data = header.encode("utf-8", "surrogatepass")
    h.update(b"H" + len(data).to_bytes(8, "big") + data)
    _feed(h, tokens)
    return h.hexdigest()


def _feed(h: Any, tokens: Iterable[Token]) -> None:
    for token in tokens:
        if isinstance(token, int):  # tokens that are no text: only their number is keyed
            h.update(b"N" + token.to_bytes(8, "big"))
        else:
            h.update(b"T" + len(token).to_bytes(4, "big") + token)


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One rendered piece; `start`/`end` are token offsets counting hidden tokens.

    `key` is the prefix key through its last token (`parent` the one before its header).
    `tokens` are kept only where keys are needed inside segments (regime L's grid).
    """

    header: str
    start: int
    end: int
    parent: str
    key: str
    tokens: tuple[Token, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Node:
    """What one unit (a tool, the instructions, a message or input item) renders to.

    Everything here follows from the unit chain it is kept under (the units before it
    and its own JSON, markers included), so a later request sharing that prefix reuses
    it. `marks` are its `prompt_cache_breakpoint`s: (end offset, marker, path).
    """

    segments: tuple[Segment, ...]
    kind: ItemKind | None
    end: int
    key: str
    marks: tuple[tuple[int, Any, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    """A payload as a token stream, with the boundaries the cache algorithms need.

    `endings` are the eligible implicit boundaries of regime N, ascending: the end of each
    user message, of the last tool output of each consecutive group, and of the initial
    developer block (`dev_end`). `explicit` are `prompt_cache_breakpoint`s in order.
    """

    hidden: int
    segments: tuple[Segment, ...]
    ends: tuple[int, ...]
    total: int
    endings: tuple[int, ...]
    dev_end: int | None
    explicit: tuple[tuple[int, str], ...]
    mode: Literal["implicit", "explicit"]
    ttl: str
    retention: str | None
    namespace: str

    def key(self, position: int) -> str:
        """The prefix key at token offset `position` (> 0, at most `total`): every header
        of a segment that starts before it, and the tokens up to it."""
        return self.keys([position])[position]

    def keys(self, positions: Sequence[int], memo: ChainMemo | None = None) -> dict[int, str]:
        """`key` at each of `positions` (ascending), in one pass over the tokens of each
        segment they fall inside; with `memo`, keys inside a segment are kept there (the
        same segment recurs in every later request of the conversation)."""
        out: dict[int, str] = {}
        i = 0
        while i < len(positions):
            position = positions[i]
            if position <= self.hidden:
                out[position] = extend(self.namespace, "hidden", [position])
                i += 1
                continue
            segment = self.segments[bisect_left(self.ends, position)]  # holds position-1
            if position == segment.end:
                out[position] = segment.key
                i += 1
                continue
            inside = []
            while i < len(positions) and positions[i] < segment.end:
                inside.append(positions[i])
                i += 1
            found = [memo.get((segment.key, p - segment.start)) for p in inside] if memo else []
            if found and None not in found:
                out.update(zip(inside, found, strict=True))
                continue
            for p, key in zip(
                inside, _inside(segment, [p - segment.start for p in inside]), strict=True
            ):
                out[p] = key
                if memo is not None:
                    memo.put((segment.key, p - segment.start), key)
        return out

    def segment_at(self, position: int) -> int | None:
        """Index of the segment holding the token just before `position`."""
        index = bisect_left(self.ends, position)
        return index if index < len(self.segments) else None


def _inside(segment: Segment, cuts: list[int]) -> Iterator[str]:
    """The keys after the first `cuts` tokens of `segment` (ascending), in one pass."""
    tokens = segment.tokens
    assert tokens is not None, "tokens are kept when keys inside segments are due"
    h = hashlib.sha256(segment.parent.encode("utf-8", "surrogatepass"))
    data = segment.header.encode("utf-8", "surrogatepass")
    h.update(b"H" + len(data).to_bytes(8, "big") + data)
    fed = next_token = 0  # whole tokens fed to `h`, and how many that is
    for cut in cuts:
        while next_token < len(tokens):
            token = tokens[next_token]
            size = token if isinstance(token, int) else 1
            if fed + size > cut:
                break
            _feed(h, (token,))
            fed, next_token = fed + size, next_token + 1
        at = h.copy()
        if fed < cut:  # the cut falls inside a run of non-text tokens
            _feed(at, (cut - fed,))
        yield at.hexdigest()


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, provider="openai")


def _marker_ttl(marker: Any, path: str, ttls: Collection[str], default: str) -> str:
    where = f"{path}.prompt_cache_breakpoint"
    if not isinstance(marker, dict) or marker.get("mode", "explicit") != "explicit":
        raise _invalid(f"{where}.mode: expected 'explicit'")
    ttl = marker.get("ttl") or default
    if ttl not in ttls:
        raise _invalid(f"{where}.ttl: expected one of {', '.join(map(repr, ttls))}")
    return str(ttl)


class _Unit:
    """Builds the segments of one unit, from a start offset and the key before it."""

    __slots__ = ("keep", "key", "marks", "pos", "segments", "tok")

    def __init__(self, pos: int, key: str, keep: bool, tok: Tokenizer) -> None:
        self.pos = pos
        self.key = key
        self.keep = keep
        self.tok = tok
        self.segments: list[Segment] = []
        self.marks: list[tuple[int, Any, str]] = []

    def segment(self, header: str, tokens: list[Token], marker: Any = None, path: str = "") -> None:
        start, self.pos = self.pos, self.pos + counts.count(tokens)
        parent, self.key = self.key, extend(self.key, header, tokens)
        self.segments.append(
            Segment(
                header=header,
                start=start,
                end=self.pos,
                parent=parent,
                key=self.key,
                tokens=tuple(tokens) if self.keep else None,
            )
        )
        if marker is not None:
            self.marks.append((self.pos, marker, path))

    def tool(self, tool: Any, path: str, first: bool) -> None:
        if not isinstance(tool, dict):
            raise _invalid(f"{path}: expected an object")
        # The whole definition is in the header: exact schema JSON and order are the key.
        self.segment("tool|" + compact(tool), counts.tool(self.tok, tool, first))

    def parts(self, tag: str, content: Any, path: str, role: str, name: Any = None) -> None:
        """A message's content parts, framed: its head before the first, `<|end|>` after
        the last (a message without parts is one segment of its frame)."""
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts = list(parts or ())
        frame = counts.head(self.tok, role, name)
        if not parts:
            self.segment(f"{tag}|frame", [*frame, *counts.END])
            return
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise _invalid(f"{path}.{j}: expected a content part object")
            header, tokens = self._part(tag, j, part)
            first, last = frame if j == 0 else [], counts.END if j == len(parts) - 1 else []
            tokens = [*first, *tokens, *last]
            self.segment(header, tokens, part.get("prompt_cache_breakpoint"), f"{path}.{j}")

    def _part(self, tag: str, j: int, part: dict[str, Any]) -> tuple[str, list[Token]]:
        kind = part.get("type")
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        if kind in (*_TEXT_PARTS, "refusal") and isinstance(text, str):
            tokens: list[Token] = list(self.tok.pieces(text))
            label = "refusal" if kind == "refusal" else "text"
            # Whitespace-only text has no token in the estimate; keep its bytes in the key.
            return f"{tag}|{j}|{label}" + ("" if tokens or not text else "|" + text), tokens
        body = compact({k: v for k, v in part.items() if k != "prompt_cache_breakpoint"})
        if kind in _IMAGE_PARTS:
            size = counts.image(part)
        elif kind in _FILE_PARTS:
            size = counts.file(self.tok, part)
        else:  # audio and parts Stoker does not know: no documented rule
            size = max(1, len(body) // 1000)
        return f"{tag}|{j}|{body}", [size]

    def call(self, call_id: Any, name: Any, arguments: Any) -> None:
        # Arguments are a string on the wire and are hashed byte for byte.
        args = arguments if isinstance(arguments, str) else compact(arguments)
        tokens: list[Token] = [counts.MESSAGE_FRAME, *self.tok.pieces(str(name or ""))]
        tokens += self.tok.pieces(args)
        self.segment(f"call|{call_id}|{name}" + ("" if args.strip() else "|" + args), tokens)

    def other(self, item: dict[str, Any], tokens_of: str | None = None) -> None:
        body = compact(item)
        text = body if tokens_of is None else tokens_of
        self.segment("item|" + body, list(self.tok.pieces(text)))

    def message(self, role: str, message: dict[str, Any], path: str) -> ItemKind:
        kind = _ROLE_KIND.get(role, "other")
        name = message.get("name")
        tag = f"msg|{role}" + (f"|{name}" if name else "")
        if kind == "output":
            tag = f"output|{message.get('tool_call_id')}"
        content = message.get("content")
        if kind == "assistant" and not content and message.get("tool_calls"):
            return kind  # only its calls are rendered
        self.parts(tag, content, path, role, name)
        return kind


# A unit of the payload: (what it is, the object, its path). What it is decides how it
# renders, so it is part of the unit's memo key.
UnitSource = tuple[str, Any, str]


def _sources(payload: dict[str, Any], api: Api) -> Iterator[UnitSource]:
    for i, tool in enumerate(payload.get("tools") or ()):
        yield "tool", tool, f"tools[{i}]"
    if api == "chat":
        messages = payload.get("messages")
        if not isinstance(messages, list):
            raise _invalid("messages: a list of messages is required")
        for m, message in enumerate(messages):
            yield "chat", message, f"messages[{m}]"
        return
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        yield "instructions", instructions, "instructions"
    given = payload.get("input")
    if isinstance(given, str):
        yield "input", given, "input"
        return
    for k, item in enumerate(given or ()):
        yield "item", item, f"input[{k}]"


def _build(unit: _Unit, what: str, value: Any, path: str) -> ItemKind | None:
    """Render one unit; the kind of item it is (None for a tool)."""
    if what == "tool":
        unit.tool(value, path, first=path == "tools[0]")
        return None
    if what == "instructions":  # rendered as a developer message
        unit.parts("instructions", value, "instructions", "developer")
        return "dev"
    if what == "input":
        unit.parts("msg|user", value, "input", "user")
        return "user"
    if what == "chat":
        if not isinstance(value, dict) or not isinstance(value.get("role"), str):
            raise _invalid(f"{path}: each message needs a `role`")
        role_kind = unit.message(value["role"], value, f"{path}.content")
        for call in value.get("tool_calls") or () if role_kind == "assistant" else ():
            fn = call.get("function") or {}
            unit.call(call.get("id"), fn.get("name"), fn.get("arguments", ""))
        return role_kind
    if not isinstance(value, dict):
        raise _invalid(f"{path}: expected an input item object")
    item_type = value.get("type")
    if item_type in (None, "message") and isinstance(value.get("role"), str):
        return unit.message(value["role"], value, f"{path}.content")
    if item_type == "function_call":
        unit.call(value.get("call_id"), value.get("name"), value.get("arguments", ""))
        return "call"
    if item_type == "function_call_output":
        tag = f"output|{value.get('call_id')}"
        unit.parts(tag, value.get("output"), f"{path}.output", "tool")
        return "output"
    if item_type == "reasoning":
        summary = " ".join(s.get("text", "") for s in value.get("summary") or ())
        unit.other(value, summary)
        return "other"
    unit.other(value)
    return "output" if str(item_type).endswith("_output") else "other"


def _endings(items: Sequence[tuple[ItemKind | None, int]]) -> tuple[tuple[int, ...], int | None]:
    initial = 0
    while initial < len(items) and items[initial][0] == "dev":
        initial += 1
    dev_end = items[initial - 1][1] if initial else None
    endings: list[int] = []
    for i, (kind, end) in enumerate(items):
        last_output = kind == "output" and (i + 1 == len(items) or items[i + 1][0] != "output")
        eligible = kind == "user" or last_output or i == initial - 1
        if eligible and (not endings or endings[-1] != end):
            endings.append(end)
    return tuple(endings), dev_end


def _hidden_settings(payload: dict[str, Any], api: Api) -> list[Any]:
    if api == "chat":
        return [
            payload.get("reasoning_effort"),
            payload.get("verbosity"),
            payload.get("response_format"),
        ]
    text = payload.get("text") or {}
    return [
        (payload.get("reasoning") or {}).get("effort"),
        text.get("verbosity"),
        text.get("format"),
    ]


def render(
    payload: dict[str, Any],
    api: Api,
    *,
    model: str,
    org: str,
    hidden: int,
    ttls: Collection[str],
    memo: ChainMemo,
    tokenizer: Tokenizer,
    keep_tokens: bool = False,
    trusted: bool = False,
) -> Rendered:
    """Segments, boundaries and options of `payload` (raises `InvalidRequest`).

    Units rendered before after the same prefix come from `memo`: by identity when the
    caller vouches that the payload is never mutated (`trusted`), else by content.
    `keep_tokens` keeps each segment's tokens, for keys inside segments (regime L).
    `model` is the model's one name (`model_info(...).name`), however the payload spells
    it; `tokenizer` is its encoding (the memo keys by model, so by encoding too).
    """
    options = payload.get("prompt_cache_options") or {}
    mode = options.get("mode") or "implicit"
    if mode not in ("implicit", "explicit"):
        raise _invalid("prompt_cache_options.mode: expected 'implicit' or 'explicit'")
    ttl = options.get("ttl") or "30m"
    if ttl not in ttls:
        raise _invalid(f"prompt_cache_options.ttl: expected one of {', '.join(map(repr, ttls))}")
    key = payload.get("prompt_cache_key")
    if isinstance(key, str) and len(key) > 64:
        raise _invalid("prompt_cache_key: string too long, expected at most 64 characters")
    retention = payload.get("prompt_cache_retention")
    if retention is not None and retention not in _RETENTION:
        raise _invalid("prompt_cache_retention: expected 'in_memory' or '24h'")
    settings = [key, payload.get("service_tier"), *_hidden_settings(payload, api)]
    settings.append(payload.get("parallel_tool_calls"))
    namespace = link("openai", org, model, compact(settings))
    root = extend(namespace, "hidden", [hidden])
    # The unit chain adds what changes how units render, not what they hash to.
    chain = link(root, api, str(hidden), str(keep_tokens))
    nodes: list[_Node] = []
    pos, after = hidden, root
    for what, value, path in _sources(payload, api):
        known = memo.known(chain, value, trusted)
        if known is not None:
            _, chain, node = known
        else:
            previous, chain = chain, link(chain, what, compact(value))
            node = memo.get(chain)
            if node is None:
                unit = _Unit(pos, after, keep_tokens, tokenizer)
                kind = _build(unit, what, value, path)
                node = _Node(
                    segments=tuple(unit.segments),
                    kind=kind,
                    end=unit.pos,
                    key=unit.key,
                    marks=tuple(unit.marks),
                )
                memo.put(chain, node)
            memo.remember(previous, value, trusted, chain, node)
        nodes.append(node)
        pos, after = node.end, node.key
    # Every reply is primed with `<|start|>assistant<|message|>`: counted, never an ending.
    priming = [counts.REPLY_PRIMING]
    reply = Segment(
        header="reply",
        start=pos,
        end=pos + counts.REPLY_PRIMING,
        parent=after,
        key=extend(after, "reply", priming),
        tokens=tuple(priming) if keep_tokens else None,
    )
    segments = (*(s for node in nodes for s in node.segments), reply)
    items = [(node.kind, node.end) for node in nodes if node.kind is not None]
    endings, dev_end = _endings(items)
    explicit = [
        (p, _marker_ttl(marker, where, ttls, ttl))
        for node in nodes
        for p, marker, where in node.marks
    ]
    return Rendered(
        hidden=hidden,
        segments=segments,
        ends=tuple(s.end for s in segments),
        total=reply.end,
        endings=tuple(p for p in endings if p > 0),
        dev_end=dev_end if dev_end else None,
        explicit=tuple((p, t) for p, t in explicit if p > 0),
        mode="explicit" if mode == "explicit" else "implicit",
        ttl=ttl,
        retention=_RETENTION[retention] if retention is not None else None,
        namespace=namespace,
    )
