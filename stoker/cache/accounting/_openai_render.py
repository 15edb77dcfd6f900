"""OpenAI request payload (Chat Completions or Responses) -> a token stream with boundaries.

Render order is hidden tokens -> tools -> instructions / system / developer -> input
items (reference 2.7). Each tool, message part, call and output is one segment: a header
(role, ids, structure) plus its counted tokens. Text is split with `split_tokens`, which
joins back byte for byte, so prefix keys see exact strings, and a key can be taken at
any token (regime L's grid) or at a message end (regime N).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from stoker.cache.accounting._hashing import chain, compact, token_stream_keys
from stoker.cache.tokens import split_tokens
from stoker.errors import InvalidRequest

Api = Literal["chat", "responses"]
ItemKind = Literal["dev", "user", "assistant", "call", "output", "other"]
_TEXT_PARTS = ("text", "input_text", "output_text")
_ROLE_KIND: dict[str, ItemKind] = {
    "system": "dev",
    "developer": "dev",
    "user": "user",
    "assistant": "assistant",
    "tool": "output",
}
_RETENTION = {"in_memory": "in_memory", "in-memory": "in_memory", "24h": "24h"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One rendered piece; `start`/`end` are token offsets counting hidden tokens."""

    header: str
    tokens: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    """A payload as a token stream, with the boundaries the cache algorithms need.

    `endings` are the eligible implicit boundaries of regime N, ascending: the end of each
    user message, of the last tool output of each consecutive group, and of the initial
    developer block (`dev_end`). `explicit` are `prompt_cache_breakpoint`s in order.
    """

    namespace: str
    hidden: int
    segments: tuple[Segment, ...]
    total: int
    endings: tuple[int, ...]
    dev_end: int | None
    explicit: tuple[tuple[int, str], ...]
    mode: Literal["implicit", "explicit"]
    ttl: str
    retention: str | None

    def keys(self, positions: Collection[int]) -> dict[int, str]:
        """Prefix keys at the given token offsets (each > 0, at most `total`)."""
        stream = [("hidden", ("<hidden>",) * self.hidden)]
        stream += [(s.header, s.tokens) for s in self.segments]
        return token_stream_keys(self.namespace, stream, set(positions))

    def segment_at(self, position: int) -> int | None:
        """Index of the segment holding the token just before `position`."""
        index = bisect_left([s.end for s in self.segments], position)
        return index if index < len(self.segments) else None


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, provider="openai")


class _Builder:
    __slots__ = ("default_ttl", "explicit", "items", "pos", "segments", "ttls")

    def __init__(self, hidden: int, ttls: Collection[str], default_ttl: str) -> None:
        self.pos = hidden
        self.segments: list[Segment] = []
        self.explicit: list[tuple[int, str]] = []
        self.items: list[tuple[ItemKind, int]] = []
        self.ttls = ttls
        self.default_ttl = default_ttl

    def segment(
        self, header: str, tokens: tuple[str, ...], marker: Any = None, path: str = ""
    ) -> None:
        start, self.pos = self.pos, self.pos + len(tokens)
        self.segments.append(Segment(header=header, tokens=tokens, start=start, end=self.pos))
        if marker is not None:
            self.explicit.append((self.pos, self._marker_ttl(marker, path)))

    def _marker_ttl(self, marker: Any, path: str) -> str:
        where = f"{path}.prompt_cache_breakpoint"
        if not isinstance(marker, dict) or marker.get("mode", "explicit") != "explicit":
            raise _invalid(f"{where}.mode: expected 'explicit'")
        ttl = marker.get("ttl") or self.default_ttl
        if ttl not in self.ttls:
            raise _invalid(f"{where}.ttl: expected one of {', '.join(map(repr, self.ttls))}")
        return ttl

    def item(self, kind: ItemKind) -> None:
        self.items.append((kind, self.pos))

    def tool(self, tool: Any, path: str) -> None:
        if not isinstance(tool, dict):
            raise _invalid(f"{path}: expected an object")
        fn: dict[str, Any] = tool["function"] if isinstance(tool.get("function"), dict) else tool
        params = fn.get("parameters")
        tokens = split_tokens(str(fn.get("name", ""))) + split_tokens(
            str(fn.get("description", ""))
        )
        tokens += split_tokens(compact(params)) if params is not None else []
        # The whole definition is in the header: exact schema JSON and order are the key.
        self.segment("tool|" + compact(tool), tuple(tokens))

    def parts(self, tag: str, content: Any, path: str) -> None:
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for j, part in enumerate(parts or ()):
            if not isinstance(part, dict):
                raise _invalid(f"{path}.{j}: expected a content part object")
            kind = part.get("type")
            text = part.get("refusal") if kind == "refusal" else part.get("text")
            if kind in (*_TEXT_PARTS, "refusal") and isinstance(text, str):
                tokens = tuple(split_tokens(text))
                label = "refusal" if kind == "refusal" else "text"
                # Whitespace-only text has no token; keep its bytes in the key anyway.
                header = f"{tag}|{j}|{label}" + ("" if tokens or not text else "|" + text)
            else:
                body = compact({k: v for k, v in part.items() if k != "prompt_cache_breakpoint"})
                header = f"{tag}|{j}|{body}"
                tokens = ("<part>",) * max(1, len(body) // 1000)
            self.segment(header, tokens, part.get("prompt_cache_breakpoint"), f"{path}.{j}")

    def call(self, call_id: Any, name: Any, arguments: Any) -> None:
        # Arguments are a string on the wire and are hashed byte for byte.
        args = arguments if isinstance(arguments, str) else compact(arguments)
        tokens = split_tokens(str(name or "")) + split_tokens(args)
        self.segment(
            f"call|{call_id}|{name}" + ("" if tokens or not args else "|" + args), tuple(tokens)
        )

    def other(self, item: dict[str, Any], tokens_of: str | None = None) -> None:
        body = compact(item)
        self.segment("item|" + body, tuple(split_tokens(body if tokens_of is None else tokens_of)))

    def message(self, role: str, message: dict[str, Any], path: str) -> ItemKind:
        kind = _ROLE_KIND.get(role, "other")
        name = message.get("name")
        tag = f"msg|{role}" + (f"|{name}" if name else "")
        if kind == "output":
            tag = f"output|{message.get('tool_call_id')}"
        self.parts(tag, message.get("content"), path)
        return kind


def _chat(payload: dict[str, Any], b: _Builder) -> None:
    messages = payload.get("messages")
    if not isinstance(messages, list):
        raise _invalid("messages: a list of messages is required")
    for m, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _invalid(f"messages[{m}]: each message needs a `role`")
        kind = b.message(message["role"], message, f"messages[{m}].content")
        b.item(kind)
        for call in message.get("tool_calls") or () if kind == "assistant" else ():
            fn = call.get("function") or {}
            b.call(call.get("id"), fn.get("name"), fn.get("arguments", ""))
            b.item("call")


def _responses(payload: dict[str, Any], b: _Builder) -> None:
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        b.parts("instructions", instructions, "instructions")
        b.item("dev")
    given = payload.get("input")
    if isinstance(given, str):
        b.parts("msg|user", given, "input")
        b.item("user")
        return
    for k, item in enumerate(given or ()):
        path = f"input[{k}]"
        if not isinstance(item, dict):
            raise _invalid(f"{path}: expected an input item object")
        kind = item.get("type")
        if kind in (None, "message") and isinstance(item.get("role"), str):
            b.item(b.message(item["role"], item, f"{path}.content"))
        elif kind == "function_call":
            b.call(item.get("call_id"), item.get("name"), item.get("arguments", ""))
            b.item("call")
        elif kind == "function_call_output":
            b.parts(f"output|{item.get('call_id')}", item.get("output"), f"{path}.output")
            b.item("output")
        elif kind == "reasoning":
            summary = " ".join(s.get("text", "") for s in item.get("summary") or ())
            b.other(item, summary)
            b.item("other")
        else:
            b.other(item)
            b.item("output" if str(kind).endswith("_output") else "other")


def _endings(items: list[tuple[ItemKind, int]]) -> tuple[tuple[int, ...], int | None]:
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
    payload: dict[str, Any], api: Api, *, org: str, hidden: int, ttls: Collection[str]
) -> Rendered:
    """Segments, boundaries and options of `payload` (raises `InvalidRequest`)."""
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
    b = _Builder(hidden, ttls, ttl)
    for i, tool in enumerate(payload.get("tools") or ()):
        b.tool(tool, f"tools[{i}]")
    (_chat if api == "chat" else _responses)(payload, b)
    endings, dev_end = _endings(b.items)
    settings = [key, payload.get("service_tier"), *_hidden_settings(payload, api)]
    settings.append(payload.get("parallel_tool_calls"))
    return Rendered(
        namespace=chain("openai", org, str(payload.get("model")), compact(settings)),
        hidden=hidden,
        segments=tuple(b.segments),
        total=b.pos,
        endings=tuple(p for p in endings if p > 0),
        dev_end=dev_end if dev_end else None,
        explicit=tuple((p, ttl) for p, ttl in b.explicit if p > 0),
        mode="explicit" if mode == "explicit" else "implicit",
        ttl=ttl,
        retention=_RETENTION[retention] if retention is not None else None,
    )
