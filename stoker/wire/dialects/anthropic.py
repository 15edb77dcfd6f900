"""Anthropic Messages API payloads.

Render order is tools -> system -> messages. Breakpoints become `cache_control` markers
on the chosen blocks; markers are not part of the cache key, so a block that carried one
last turn still hits without it. Each message's rendered content is memoized on the
message, so a long history costs only its new messages; marked blocks are copied, never
mutated in place.
"""

from __future__ import annotations

import json
from typing import Any

from stoker.errors import WireError
from stoker.wire.blocks import (
    Block,
    DocumentBlock,
    ImageBlock,
    ImageRefBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from stoker.wire.canonical import canonical_json
from stoker.wire.dialects._chain import ChainMemo, remembered
from stoker.wire.dialects._memo import content_message, detached, kept_on, rendered_history
from stoker.wire.dialects._shape import checked, malformed, model_of, response_object
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.output import NativeOutput
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "anthropic"


def _render_block(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        args = block.arguments_or_empty()
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": args}
    if isinstance(block, ToolResultBlock):
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": block.content,
        }
        if block.is_error:
            out["is_error"] = True
        return out
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    if isinstance(block, ImageBlock):
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block.media_type, "data": block.data},
        }
    if isinstance(block, ImageRefBlock):
        return {"type": "image", "source": _reference(block.url, block.file_id)}
    if isinstance(block, DocumentBlock):
        return _render_document(block)
    raise WireError(f"cannot render block {block!r} for Anthropic")


def _reference(url: str, file_id: str) -> dict[str, str]:
    return {"type": "url", "url": url} if url else {"type": "file", "file_id": file_id}


def _render_document(block: DocumentBlock) -> dict[str, Any]:
    source: dict[str, str]
    if block.url or block.file_id:
        source = _reference(block.url, block.file_id)
    elif block.media_type == "text/plain":
        source = {"type": "text", "media_type": "text/plain", "data": block.data}
    else:
        source = {"type": "base64", "media_type": block.media_type, "data": block.data}
    out: dict[str, Any] = {"type": "document", "source": source}
    if block.name:
        out["title"] = block.name
    return out


def _parse_image(source: dict[str, Any]) -> Block:
    kind = source.get("type", "base64")
    if kind == "url":
        return ImageRefBlock(url=_string(source["url"], "source.url"))
    if kind == "file":
        return ImageRefBlock(file_id=_string(source["file_id"], "source.file_id"))
    if kind != "base64":
        raise WireError(f"image source.type must be base64, url or file, not {kind!r}")
    return ImageBlock(media_type=source.get("media_type", ""), data=source.get("data", ""))


def _parse_document(data: dict[str, Any]) -> DocumentBlock:
    source = data["source"]
    kind = source.get("type")
    name = str(data.get("title") or "")
    if kind == "url":
        return DocumentBlock(url=_string(source["url"], "source.url"), name=name)
    if kind == "file":
        return DocumentBlock(file_id=_string(source["file_id"], "source.file_id"), name=name)
    if kind == "content":  # custom content: its text blocks, read as one plain text
        parts = source.get("content")
        text = parts if isinstance(parts, str) else "".join(p["text"] for p in parts)
        return DocumentBlock(media_type="text/plain", data=text, name=name)
    if kind not in ("base64", "text"):
        raise WireError(
            f"document source.type must be base64, text, url, file or content, not {kind!r}"
        )
    return DocumentBlock(
        media_type=_string(source["media_type"], "source.media_type"),
        data=_string(source["data"], "source.data"),
        name=name,
    )


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"{where} must be a string, not {type(value).__name__}")
    return value


def _tools(prefix: Prefix) -> list[dict[str, Any]]:
    return kept_on(prefix, NAME, lambda: [json.loads(t) for t in prefix.tools])


def _tool_choice(params: CacheParams) -> dict[str, Any] | None:
    choice = params.tool_choice
    out: dict[str, Any]
    if choice.startswith("tool:"):
        out = {"type": "tool", "name": choice.removeprefix("tool:")}
    elif choice in ("auto", "any", "none"):
        out = {"type": choice}
    else:
        raise WireError(f"unknown tool_choice {choice!r}; use auto, any, none or tool:NAME")
    if not params.parallel_tool_calls and choice != "none":
        out["disable_parallel_tool_use"] = True
    elif choice == "auto":
        return None  # the API default; omitting it keeps the payload minimal
    return out


def _marker(ttl: str) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The Messages API body for `request` (a dict an SDK or an HTTP client can send);
    its containers are the caller's own unless `shared` (see `stoker.wire.dialects`)."""
    prefix = request.prefix
    tools = _tools(prefix)
    system: list[dict[str, Any]] = (
        [{"type": "text", "text": prefix.system}] if prefix.system else []
    )
    messages = rendered_history(request, NAME, lambda m: content_message(m, NAME, _render_block))

    for bp in request.breakpoints:
        if bp.message is None:
            if system:
                system[-1] = {**system[-1], "cache_control": _marker(bp.ttl)}
            elif tools:
                tools = [*tools[:-1], {**tools[-1], "cache_control": _marker(bp.ttl)}]
            continue
        msg = messages[bp.message]
        content = list(msg["content"])
        content[bp.block] = {**content[bp.block], "cache_control": _marker(bp.ttl)}
        messages[bp.message] = {"role": msg["role"], "content": content}

    body: dict[str, Any] = {"model": prefix.params.model, "max_tokens": request.max_tokens}
    if tools:
        body["tools"] = tools
    if system:
        body["system"] = system
    body["messages"] = messages
    choice = _tool_choice(prefix.params)
    if choice is not None:
        body["tool_choice"] = choice
    if prefix.params.thinking_budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": prefix.params.thinking_budget}
    config: dict[str, Any] = {}
    if prefix.params.effort is not None:
        config["effort"] = prefix.params.effort
    if prefix.params.output is not None:
        schema = NativeOutput.from_param(prefix.params.output).schema
        config["format"] = {"type": "json_schema", "schema": schema}
    if config:
        body["output_config"] = config
    if request.stream:
        body["stream"] = True
    return body if shared else detached(body)


def _parse_block(data: dict[str, Any]) -> Block:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(text=data["text"])
    if kind == "tool_use":
        raw = data.get("input", {})
        # Compact, key order as received: whitespace is not part of Anthropic's key.
        input_json = (
            raw
            if isinstance(raw, str)
            else json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
        )
        return ToolUseBlock(id=data["id"], name=data["name"], input_json=input_json)
    if kind == "tool_result":
        content = data.get("content", "")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if isinstance(p, dict)]
            content = "".join(texts) if all(isinstance(t, str) for t in texts) else None
        if not isinstance(content, str):
            raise WireError("tool_result content must be a string or a list of text blocks")
        return ToolResultBlock(
            tool_use_id=data["tool_use_id"], content=content, is_error=bool(data.get("is_error"))
        )
    if kind == "thinking":
        return ThinkingBlock(thinking=data["thinking"], signature=data.get("signature", ""))
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(data=data["data"])
    if kind == "image":
        return _parse_image(data.get("source", {}))
    if kind == "document":
        return _parse_document(data)
    raise WireError(f"unsupported Anthropic content block type {kind!r}")


def _parse_content(content: Any) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (TextBlock(text=content),)
    if not isinstance(content, list):
        raise WireError("message content must be a string or a list of blocks")
    return tuple(_parse_block(b) for b in content)


def _parse_tool_choice(body: dict[str, Any]) -> tuple[str, bool]:
    choice = body.get("tool_choice") or {"type": "auto"}
    kind = choice.get("type", "auto")
    name = f"tool:{choice.get('name', '')}" if kind == "tool" else kind
    return name, not choice.get("disable_parallel_tool_use", False)


def _parse_message(m: dict[str, Any]) -> Message:
    content = _parse_content(m["content"])
    if m["role"] == "user":
        return UserMessage(content=content)
    if m["role"] == "assistant":
        return AssistantMessage(content=content)
    raise WireError(f"unexpected role {m['role']!r} in messages")


TOOL = "anthropic-tool"


def _tool_bytes(tool: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in tool.items() if k != "cache_control"})


def _prefix(
    memo: ChainMemo | None, params: CacheParams, tools: tuple[bytes, ...], system: str
) -> Prefix:
    """The prefix of these parts; the very one a previous body with equal parts got (a
    client resends the same tools and system every call: no need to hash them again)."""
    if memo is None:
        return Prefix(params=params, tools=tools, system=system)
    key = ("anthropic-prefix", params, tools, system)
    found: Prefix | None = memo.get(key)
    if found is None:
        found = Prefix(params=params, tools=tools, system=system)
        memo.put(key, found)
    return found


def _output(body: dict[str, Any]) -> str | None:
    """The body's native output format (Anthropic names none)."""
    fmt = (body.get("output_config") or {}).get("format")
    if not fmt:
        return None
    return NativeOutput(name="", schema=fmt.get("schema") or {}).to_param()


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    """Read a Messages API body back into a `Request` (what the simulator's model sees)."""
    try:
        system = body.get("system") or ""
        if isinstance(system, list):
            system = "".join(b.get("text", "") for b in system)
        tools = tuple(
            remembered(memo, TOOL, t, trusted, _tool_bytes) for t in body.get("tools") or ()
        )
        choice, parallel = _parse_tool_choice(body)
        thinking = body.get("thinking") or {}
        params = CacheParams(
            model=model_of(body),
            thinking_budget=thinking.get("budget_tokens")
            if thinking.get("type") == "enabled"
            else None,
            effort=(body.get("output_config") or {}).get("effort"),
            output=_output(body),
            tool_choice=choice,
            parallel_tool_calls=parallel,
        )
        messages = [remembered(memo, NAME, m, trusted, _parse_message) for m in body["messages"]]
        return Request(
            prefix=_prefix(memo, params, tools, system),
            messages=tuple(messages),
            max_tokens=int(body.get("max_tokens", 0)),
            stream=bool(body.get("stream", False)),
        )
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        # ValueError / OverflowError: a number where text belongs, an infinite max_tokens
        raise WireError(f"malformed Anthropic request: {exc!r}") from exc


def usage_fields(usage: Usage) -> dict[str, Any]:
    """Usage with Anthropic's field names (input_tokens is the uncached tail only)."""
    return {
        "input_tokens": usage.uncached,
        "cache_creation_input_tokens": usage.written,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.written_5m,
            "ephemeral_1h_input_tokens": usage.written_1h,
        },
        "output_tokens": usage.output,
    }


def parse_usage(data: dict[str, Any]) -> Usage:
    creation = data.get("cache_creation") or {}
    w5 = creation.get("ephemeral_5m_input_tokens")
    w1 = creation.get("ephemeral_1h_input_tokens") or 0
    if w5 is None:  # older responses only carry the total; it is all 5-minute writes
        w5 = (data.get("cache_creation_input_tokens") or 0) - w1
    return Usage(
        uncached=data.get("input_tokens") or 0,
        written_5m=w5,
        written_1h=w1,
        read=data.get("cache_read_input_tokens") or 0,
        output=data.get("output_tokens") or 0,
    )


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    """A Messages API response body for `message` (what the simulator answers)."""
    return {
        "id": message.id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_render_block(b) for b in message.content],
        "stop_reason": message.stop_reason,
        "stop_sequence": None,
        "usage": usage_fields(usage),
    }


def parse_response(body: Any) -> tuple[AssistantMessage, Usage]:
    """The assistant message (exact blocks) and normalized usage of a response body;
    a `WireError` for anything that is not a Messages response."""
    what = "Anthropic response"
    body = response_object(body, "content", what)
    with malformed(what):
        message = AssistantMessage(
            content=_parse_content(body["content"]),
            stop_reason=body.get("stop_reason") or "end_turn",
            id=body.get("id", ""),
        )
        usage = parse_usage(body.get("usage") or {})
    return checked(message, usage, what)
