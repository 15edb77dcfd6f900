"""Amazon Bedrock's Converse API payloads (`bedrock-runtime`'s `converse` and
`converse_stream`), for Claude models.

A rendered request is the keyword arguments of `client.converse(**kwargs)`: `modelId`
(the URI's part), `messages`, `system`, `inferenceConfig`, `toolConfig`,
`additionalModelRequestFields`, `outputConfig`. Choices made here, and why:

* A breakpoint is a `cachePoint` block *after* the block it ends, in `system`, in a
  message's `content` or in `toolConfig.tools` (docs/provider-caching.md, "Bedrock
  cache points"). `{"type": "default"}` is a 5-minute entry; a 1-hour one adds `ttl`.
* Tool inputs are objects, as on Anthropic: the model's key order is kept.
* Image and document bytes are raw `bytes` in the SDK's arguments (the SDK base64-encodes
  them on the wire); a body read off the wire carries base64 text. Both are accepted.
* Bedrock has no `tool_choice: none` and no switch for parallel tool calls: a request
  asking for either is refused here rather than sent as something else.

`anthropic_equivalent(body)` is the Messages API body Claude receives for a Converse
body: the same blocks in the same order, each `cachePoint` as `cache_control` on the
block before it. The simulator accounts Bedrock's cache on it, with Bedrock's model facts.
"""

from __future__ import annotations

import base64
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
from stoker.wire.dialects import anthropic
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.dialects._memo import content_message, detached, kept_on, rendered_history
from stoker.wire.dialects._shape import checked, malformed
from stoker.wire.messages import AssistantMessage
from stoker.wire.output import NativeOutput
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "bedrock_converse"
DEFAULT_MAX_TOKENS = 4096  # what the simulator takes when `maxTokens` is left out
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/plain": "txt",
    "text/csv": "csv",
    "text/html": "html",
    "text/markdown": "md",
}
_MEDIA = {fmt: media for media, fmt in _DOCUMENT_FORMATS.items()}


def cache_point(ttl: str) -> dict[str, Any]:
    """A `cachePoint` block: 5 minutes is Bedrock's default, so only 1 hour is named."""
    point: dict[str, Any] = {"type": "default"}
    if ttl != "5m":
        point["ttl"] = ttl
    return {"cachePoint": point}


def _raw(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError as exc:
        raise WireError(f"image or document data is not base64: {exc}") from exc


def _block(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"text": block.text}
    if isinstance(block, ToolUseBlock):
        args = block.arguments_or_empty()
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": args}}
    if isinstance(block, ToolResultBlock):
        result: dict[str, Any] = {
            "toolUseId": block.tool_use_id,
            "content": [{"text": block.content}],
        }
        if block.is_error:
            result["status"] = "error"
        return {"toolResult": result}
    if isinstance(block, ThinkingBlock):
        text = {"text": block.thinking, "signature": block.signature}
        return {"reasoningContent": {"reasoningText": text}}
    if isinstance(block, RedactedThinkingBlock):
        return {"reasoningContent": {"redactedContent": _raw(block.data)}}
    if isinstance(block, ImageBlock):
        fmt = block.media_type.removeprefix("image/")
        return {"image": {"format": fmt, "source": {"bytes": _raw(block.data)}}}
    if isinstance(block, DocumentBlock):
        return {"document": _document(block)}
    if isinstance(block, ImageRefBlock):
        raise WireError("Bedrock takes an image as bytes (or from S3), not by URL or file id")
    raise WireError(f"cannot render {block.kind} block for Bedrock")


def _document(block: DocumentBlock) -> dict[str, Any]:
    if block.url or block.file_id:
        raise WireError("Bedrock takes a document as bytes or text, not by URL or file id")
    fmt = _DOCUMENT_FORMATS.get(block.media_type)
    if fmt is None:
        raise WireError(f"Bedrock takes no documents of type {block.media_type!r}")
    source = {"text": block.data} if fmt == "txt" else {"bytes": _raw(block.data)}
    return {"format": fmt, "name": block.name or "document", "source": source}


def _tool(raw: bytes) -> dict[str, Any]:
    spec = json.loads(raw)
    tool: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description"):
        tool["description"] = spec["description"]
    tool["inputSchema"] = {"json": spec.get("input_schema") or {"type": "object"}}
    return {"toolSpec": tool}


def _tools(request: Request) -> list[dict[str, Any]]:
    prefix = request.prefix
    return kept_on(prefix, NAME, lambda: [_tool(raw) for raw in prefix.tools])


def _tool_choice(choice: str, parallel: bool) -> dict[str, Any] | None:
    if not parallel:
        raise WireError(
            "Bedrock's Converse API cannot turn parallel tool calls off; leave "
            "parallel_tool_calls on for a bedrock: model"
        )
    if choice == "auto":
        return None  # the default
    if choice == "any":
        return {"any": {}}
    if choice.startswith("tool:"):
        return {"tool": {"name": choice.removeprefix("tool:")}}
    raise WireError(
        f"Bedrock's Converse API has no tool_choice {choice!r}; use auto, any or tool:NAME"
    )


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The keyword arguments of `client.converse(...)` / `converse_stream(...)` for
    `request`; its containers are the caller's own unless `shared`."""
    prefix = request.prefix
    params = prefix.params
    tools = _tools(request)
    system: list[dict[str, Any]] = [{"text": prefix.system}] if prefix.system else []
    messages = rendered_history(request, NAME, lambda m: content_message(m, NAME, _block))
    for bp in request.breakpoints:
        if bp.message is None:
            if system:
                system = [*system, cache_point(bp.ttl)]
            elif tools:
                tools = [*tools, cache_point(bp.ttl)]
            continue
        message = messages[bp.message]
        content = list(message["content"])
        at = bp.block % len(content) + 1
        content.insert(at, cache_point(bp.ttl))
        messages[bp.message] = {"role": message["role"], "content": content}
    body: dict[str, Any] = {"modelId": params.model, "messages": messages}
    if system:
        body["system"] = system
    body["inferenceConfig"] = {"maxTokens": request.max_tokens}
    if tools:
        config: dict[str, Any] = {"tools": tools}
        choice = _tool_choice(params.tool_choice, params.parallel_tool_calls)
        if choice is not None:
            config["toolChoice"] = choice
        body["toolConfig"] = config
    if params.thinking_budget is not None:
        thinking = {"type": "enabled", "budget_tokens": params.thinking_budget}
        body["additionalModelRequestFields"] = {"thinking": thinking}
    output: dict[str, Any] = {}
    if params.effort is not None:
        output["effort"] = params.effort
    if params.output is not None:
        native = NativeOutput.from_param(params.output)
        schema = {"schema": json.dumps(native.schema, ensure_ascii=False), "name": native.name}
        output["textFormat"] = {"type": "json_schema", "structure": {"jsonSchema": schema}}
    if output:
        body["outputConfig"] = output
    return body if shared else detached(body)


# --- a Converse body as Claude's Messages body (what the cache is keyed on) -------------


def _text64(data: Any) -> str:
    """Bytes as the SDK holds them, or base64 text as the wire carries them."""
    if isinstance(data, bytes | bytearray):
        return base64.b64encode(data).decode("ascii")
    if not isinstance(data, str):
        raise WireError(f"expected bytes or base64 text, not {type(data).__name__}")
    return data


def _equivalent_block(block: dict[str, Any]) -> dict[str, Any]:
    if "text" in block:
        return {"type": "text", "text": block["text"]}
    if "toolUse" in block:
        use = block["toolUse"]
        return {
            "type": "tool_use",
            "id": use["toolUseId"],
            "name": use["name"],
            "input": use["input"],
        }
    if "toolResult" in block:
        result = block["toolResult"]
        parts = result.get("content") or []
        text = "".join(
            p["text"] if "text" in p else json.dumps(p.get("json"), separators=(",", ":"))
            for p in parts
        )
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": result["toolUseId"],
            "content": text,
        }
        if result.get("status") == "error":
            out["is_error"] = True
        return out
    if "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            return {"type": "redacted_thinking", "data": _text64(reasoning["redactedContent"])}
        text = reasoning["reasoningText"]
        return {
            "type": "thinking",
            "thinking": text["text"],
            "signature": text.get("signature", ""),
        }
    if "image" in block:
        image = block["image"]
        data = _text64(image["source"]["bytes"])
        media = f"image/{image['format']}"
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    if "document" in block:
        doc = block["document"]
        source = doc["source"]
        if "text" in source:
            src = {"type": "text", "media_type": "text/plain", "data": source["text"]}
        else:
            media = _MEDIA.get(doc.get("format", ""), "application/octet-stream")
            src = {"type": "base64", "media_type": media, "data": _text64(source["bytes"])}
        return {"type": "document", "source": src, "title": doc.get("name", "")}
    raise WireError(f"unsupported Converse content block {sorted(block)!r}")


def _marked(blocks: list[dict[str, Any]], point: dict[str, Any], where: str) -> None:
    """`cache_control` on the last block before a `cachePoint`."""
    if not blocks:
        raise WireError(f"{where}: a cachePoint must follow the content it caches")
    marker = {"type": "ephemeral", "ttl": point.get("ttl") or "5m"}
    blocks[-1] = {**blocks[-1], "cache_control": marker}


def anthropic_equivalent(body: dict[str, Any]) -> dict[str, Any]:
    """The Messages API body of a Converse body (see the module docstring)."""
    with malformed("Converse request"):
        tools: list[dict[str, Any]] = []
        config = body.get("toolConfig") or {}
        for i, tool in enumerate(config.get("tools") or ()):
            if "cachePoint" in tool:
                _marked(tools, tool["cachePoint"], f"toolConfig.tools[{i}]")
                continue
            spec = tool["toolSpec"]
            out: dict[str, Any] = {"name": spec["name"]}
            if spec.get("description"):
                out["description"] = spec["description"]
            out["input_schema"] = (spec.get("inputSchema") or {}).get("json") or {}
            tools.append(out)
        system: list[dict[str, Any]] = []
        for block in body.get("system") or ():
            if "cachePoint" in block:
                _marked(system or tools, block["cachePoint"], "system")
            else:
                system.append({"type": "text", "text": block["text"]})
        messages = []
        for i, message in enumerate(body.get("messages") or ()):
            content: list[dict[str, Any]] = []
            for block in message["content"]:
                if "cachePoint" in block:
                    _marked(content, block["cachePoint"], f"messages[{i}]")
                else:
                    content.append(_equivalent_block(block))
            messages.append({"role": message["role"], "content": content})
        inference = body.get("inferenceConfig") or {}
        out = {
            "model": body.get("modelId"),
            "max_tokens": inference.get("maxTokens", DEFAULT_MAX_TOKENS),
        }
        if tools:
            out["tools"] = tools
        if system:
            out["system"] = system
        out["messages"] = messages
        for theirs, ours in (
            ("temperature", "temperature"),
            ("topP", "top_p"),
            ("stopSequences", "stop_sequences"),
        ):
            if theirs in inference:
                out[ours] = inference[theirs]
        choice = config.get("toolChoice")
        if choice:
            kind = next(iter(choice))
            out["tool_choice"] = {"type": kind, **(choice[kind] or {})}
        extra = body.get("additionalModelRequestFields") or {}
        if extra.get("thinking"):
            out["thinking"] = extra["thinking"]
        output = body.get("outputConfig") or {}
        settings: dict[str, Any] = {}
        if output.get("effort"):
            settings["effort"] = output["effort"]
        fmt = output.get("textFormat")
        if fmt:
            schema = fmt["structure"]["jsonSchema"]["schema"]
            settings["format"] = {"type": "json_schema", "schema": json.loads(schema)}
        if settings:
            out["output_config"] = settings
        return out


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    """Read a Converse body back into a `Request` (what the simulator's model sees)."""
    return anthropic.parse_request(anthropic_equivalent(body), memo=memo)


# --- responses ----------------------------------------------------------------------


def usage_fields(usage: Usage) -> dict[str, Any]:
    """Usage under Converse's names: `inputTokens` is what no cache point covers;
    `totalTokens` counts everything, cached input included."""
    details = [
        {"ttl": ttl, "inputTokens": n}
        for ttl, n in (("1h", usage.written_1h), ("5m", usage.written_5m))
        if n
    ]
    return {
        "inputTokens": usage.uncached,
        "outputTokens": usage.output,
        "totalTokens": usage.input_total + usage.output,
        "cacheReadInputTokens": usage.read,
        "cacheWriteInputTokens": usage.written,
        "cacheDetails": details,
    }


def parse_usage(data: dict[str, Any]) -> Usage:
    """Disjoint buckets from Converse usage; `cacheDetails` splits the writes by TTL (a
    response without it wrote 5-minute entries only)."""
    written = data.get("cacheWriteInputTokens") or 0
    long = sum(
        d.get("inputTokens") or 0 for d in data.get("cacheDetails") or () if d.get("ttl") == "1h"
    )
    return Usage(
        uncached=data.get("inputTokens") or 0,
        written_5m=written - long,
        written_1h=long,
        read=data.get("cacheReadInputTokens") or 0,
        output=data.get("outputTokens") or 0,
    )


def _wire_block(block: Block) -> dict[str, Any]:
    """A response block as JSON (bytes as base64 text, as the wire carries them)."""
    rendered = _block(block)
    reasoning = rendered.get("reasoningContent") or {}
    if "redactedContent" in reasoning:
        return {"reasoningContent": {"redactedContent": _text64(reasoning["redactedContent"])}}
    return rendered


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    """A Converse response body for `message` (what the simulator answers). Converse names
    no message id and no model: `model` is in the URI the caller sent."""
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [_wire_block(b) for b in message.content],
            }
        },
        "stopReason": message.stop_reason,
        "usage": usage_fields(usage),
        "metrics": {"latencyMs": 0},
    }


def _parse_block(block: dict[str, Any]) -> Block:
    if "text" in block:
        return TextBlock(text=block["text"])
    if "toolUse" in block:
        use = block["toolUse"]
        args = use.get("input")
        # Compact, the model's key order kept (the SDK parses the object in order).
        text = (
            args
            if isinstance(args, str)
            else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        )
        return ToolUseBlock(id=use["toolUseId"], name=use["name"], input_json=text)
    if "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            return RedactedThinkingBlock(data=_text64(reasoning["redactedContent"]))
        text = reasoning["reasoningText"]
        return ThinkingBlock(thinking=text["text"], signature=text.get("signature") or "")
    raise WireError(f"unsupported Converse output block {sorted(block)!r}")


def parse_response(body: Any) -> tuple[AssistantMessage, Usage]:
    """The assistant message and normalized usage of a Converse response; a `WireError`
    for anything that is not one."""
    what = "Converse response"
    if not isinstance(body, dict) or not isinstance(body.get("output"), dict):
        raise WireError(f"malformed {what}: no 'output' object")
    with malformed(what):
        content = body["output"]["message"]["content"]
        blocks = tuple(_parse_block(b) for b in content)
        meta = body.get("ResponseMetadata") or {}
        message = AssistantMessage(
            content=blocks,
            stop_reason=body.get("stopReason") or "end_turn",
            id=str(meta.get("RequestId") or ""),
        )
        usage = parse_usage(body.get("usage") or {})
    return checked(message, usage, what)
