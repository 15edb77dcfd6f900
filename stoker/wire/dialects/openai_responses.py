"""OpenAI Responses API payloads.

Render order is tools -> developer message -> input items, each message rendered once
and memoized on the message. Choices made here, and why:

* The system prompt is the first `input` item, a `developer` message, not top-level
  `instructions`: `prompt_cache_breakpoint` is not allowed on `instructions`, and on
  GPT-5.6+ a breakpoint at the end of the static prefix is what lets two conversations
  with the same system prompt share a cache entry (docs/provider-caching.md, "OpenAI
  breakpoints and TTLs").
* Tools are sent with `"strict": false`: when it is omitted, Responses rewrites the
  schema into strict mode (every optional field becomes required), unlike Chat.
* Tool calls are `function_call` items with `arguments` = `ToolUseBlock.input_json`
  verbatim (OpenAI hashes the string byte for byte); results are `function_call_output`
  items, which have no error flag, so `is_error` is dropped and the content kept exact.
* A thinking block is replayed as a `reasoning` item only when its signature holds the
  encrypted content; without it the item cannot be replayed statelessly. Items carry no
  `id`: ids refer to stored items and are rejected when `store` is false. When an effort
  is set, `include` asks for the encrypted content so the next turn can replay it.
* `max_tokens == 0` (Anthropic's pre-warm) renders as `prompt_cache_options.prewarm`,
  Responses' own way to write the cache and generate nothing; it parses back to 0.
* Assistant text goes back as a plain `assistant` message (output parts cannot carry a
  breakpoint, so a breakpoint there moves back to the nearest user-side part).
"""

from __future__ import annotations

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
from stoker.wire.dialects._call_ids import with_call_ids
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.dialects._memo import detached, rendered_history
from stoker.wire.dialects._openai_common import (
    Event,
    Rendered,
    apply_breakpoints,
    arguments_text,
    cache_fields,
    data_url,
    file_fields,
    memoized,
    memoized_tools,
    parse_parts,
    parse_tool_choice,
    plain,
    render_user,
    replay,
    text_of,
    tool_bytes,
    tool_params,
)
from stoker.wire.dialects._shape import checked, malformed, model_of, response_object
from stoker.wire.messages import AssistantMessage, Message
from stoker.wire.output import NativeOutput
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "openai_responses"


def _part(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "input_text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "input_image", "image_url": data_url(block), "detail": "auto"}
    if isinstance(block, ImageRefBlock):
        where = {"image_url": block.url} if block.url else {"file_id": block.file_id}
        return {"type": "input_image", **where, "detail": block.detail or "auto"}
    if isinstance(block, DocumentBlock):
        return {"type": "input_file", **file_fields(block, url_key="file_url")}
    raise WireError(f"cannot render {block.kind} block in a Responses user message")


def _result(block: ToolResultBlock) -> tuple[dict[str, Any], str]:
    item = {"type": "function_call_output", "call_id": block.tool_use_id, "output": block.content}
    return item, "output"


def _call(block: ToolUseBlock) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": block.id,
        "name": block.name,
        "arguments": block.input_json,
    }


def _output_items(message: AssistantMessage) -> list[dict[str, Any]]:
    """Reasoning, message and call items in block order; adjacent texts share a message."""
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] | None = None
    for block in message.content:
        if isinstance(block, TextBlock):
            if texts is None:
                texts = []
                items.append({"type": "message", "role": "assistant", "content": texts})
            texts.append({"type": "output_text", "text": block.text, "annotations": []})
            continue
        texts = None
        if isinstance(block, ToolUseBlock):
            items.append(_call(block))
        elif isinstance(block, ThinkingBlock):
            summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
            reasoning = {"type": "reasoning", "summary": summary}
            items.append({**reasoning, "encrypted_content": block.signature or None})
        elif not isinstance(block, RedactedThinkingBlock):  # Anthropic-only; nothing to send
            raise WireError(f"cannot render {block.kind} block in a Responses assistant turn")
    return items


def _assistant(message: AssistantMessage) -> Rendered:
    items = []
    for item in _output_items(message):
        if item["type"] == "message":
            items.append({"role": "assistant", "content": plain(item["content"])})
        elif item["type"] != "reasoning" or item["encrypted_content"]:
            items.append(item)
    return Rendered(items=items, anchors=(None,) * len(message.content))


def _rendered(message: Message) -> Rendered:
    return memoized(message, NAME, _assistant, lambda m: render_user(m, _result, _part))


def _tool(name: str, description: str | None, parameters: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "function", "name": name}
    if description is not None:
        tool["description"] = description
    return {**tool, "parameters": parameters, "strict": False}


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The body of `client.responses.create(**body)` for `request`; its containers are
    the caller's own unless `shared` (see `stoker.wire.dialects`)."""
    prefix = request.prefix
    params: CacheParams = prefix.params
    system = [{"role": "developer", "content": prefix.system}] if prefix.system else []
    items = system + rendered_history(request, NAME, lambda m: _rendered(m).items)
    apply_breakpoints(
        request,
        items,
        system_at=0 if system else None,
        rendered=_rendered,
        text_type="input_text",
    )
    body: dict[str, Any] = {"model": params.model}
    tools = memoized_tools(prefix, NAME, _tool)
    if tools:
        body["tools"] = tools
        tool_params(body, params, lambda name: {"type": "function", "name": name})
    body["input"] = items
    if params.effort is not None:
        body["reasoning"] = {"effort": params.effort}
        body["include"] = ["reasoning.encrypted_content"]
    if params.output is not None:
        native = NativeOutput.from_param(params.output)
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": native.name,
                "schema": native.schema,
                "strict": False,
            }
        }
    if request.max_tokens == 0:  # a pre-warm: write the cache, generate nothing
        body["prompt_cache_options"] = {"prewarm": True}
    else:
        body["max_output_tokens"] = request.max_tokens
    cache_fields(body, request)
    if request.stream:
        body["stream"] = True
    return body if shared else detached(body)


def _item_event(item: dict[str, Any]) -> Event:
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and role in ("system", "developer"):
        return "system", text_of(item.get("content")), False, role
    if kind in (None, "message") and role == "user":
        return "user", tuple(parse_parts(item["content"])), True, role
    if kind in (None, "message") and role == "assistant":
        return "assistant", tuple(parse_parts(item["content"])), False, role
    if kind == "function_call_output":
        result = ToolResultBlock(tool_use_id=item["call_id"], content=text_of(item["output"]))
        return "user", (result,), False, "tool"
    if kind in ("function_call", "reasoning"):
        return "assistant", (_parse_output_block(item),), False, "assistant"
    raise WireError(f"unsupported Responses input item {kind or role!r}")


def _parse_output_block(item: dict[str, Any]) -> Block:
    if item["type"] == "reasoning":
        # Several summary parts read back as one text; the encrypted content is what counts.
        summary = "\n\n".join(s.get("text", "") for s in item.get("summary") or ())
        return ThinkingBlock(thinking=summary, signature=item.get("encrypted_content") or "")
    args = arguments_text(item.get("arguments", ""))
    # Some compatible servers omit the call_id or send null; a response's calls get one
    # from `with_call_ids`.
    return ToolUseBlock(id=item.get("call_id") or "", name=item["name"], input_json=args)


def _output(fmt: Any) -> str | None:
    """A `text.format` of a JSON schema as the prefix holds it (other formats: None)."""
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    return NativeOutput(name=str(fmt.get("name", "")), schema=fmt.get("schema") or {}).to_param()


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    """Read a Responses body back into a `Request` (what the simulator's model sees)."""
    try:
        given = body.get("input") or []
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given
        messages, system = replay(items, _item_event, memo, trusted, NAME)
        if body.get("instructions"):
            system.insert(0, body["instructions"])
        tools = tuple(
            tool_bytes(t["name"], t.get("description"), t.get("parameters"))
            for t in body.get("tools") or ()
        )
        prewarm = bool((body.get("prompt_cache_options") or {}).get("prewarm"))
        params = CacheParams(
            model=model_of(body),
            effort=(body.get("reasoning") or {}).get("effort"),
            output=_output((body.get("text") or {}).get("format")),
            tool_choice=parse_tool_choice(body.get("tool_choice")),
            parallel_tool_calls=body.get("parallel_tool_calls", True) is not False,
        )
        return Request(
            prefix=Prefix(params=params, tools=tools, system="\n".join(system)),
            messages=messages,
            max_tokens=0 if prewarm else int(body.get("max_output_tokens") or 0),
            cache_key=body.get("prompt_cache_key"),
            cache_retention=body.get("prompt_cache_retention"),
            stream=bool(body.get("stream", False)),
        )
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        # ValueError / OverflowError: a number where text belongs, an infinite max_tokens
        raise WireError(f"malformed Responses request: {exc!r}") from exc


def usage_fields(usage: Usage) -> dict[str, Any]:
    """Usage under the Responses names: input_tokens is the TOTAL input."""
    return {
        "input_tokens": usage.input_total,
        "input_tokens_details": {
            "cached_tokens": usage.read,
            "cache_write_tokens": usage.written,
            "cache_write_tokens_details": {
                "ttl_30m_tokens": usage.written_5m,
                "ttl_12h_tokens": usage.written_1h,
            },
        },
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_total + usage.output,
    }


def parse_usage(data: dict[str, Any]) -> Usage:
    """Disjoint buckets: 30-minute writes are the short bucket, 12-hour the long one."""
    # OpenAI-compatible servers (vLLM's /v1/responses) may omit or null the details.
    details = data.get("input_tokens_details") or {}
    read = details.get("cached_tokens") or 0
    # The TTL split exists only on GPT-5.6+; without it every write is a 30-minute one.
    by_ttl = details.get("cache_write_tokens_details") or {}
    long = by_ttl.get("ttl_12h_tokens") or 0
    short = by_ttl.get("ttl_30m_tokens")
    if short is None:
        short = (details.get("cache_write_tokens") or 0) - long
    total = data.get("input_tokens") or 0
    return Usage(
        uncached=max(total - read - short - long, 0),
        written_5m=short,
        written_1h=long,
        read=read,
        output=data.get("output_tokens") or 0,
    )


def render_response(message: AssistantMessage, usage: Usage, model: str) -> dict[str, Any]:
    """A Response object for `message`.

    The echoed request settings (`tools`, `tool_choice`, `parallel_tool_calls`) are the
    defaults, and `created_at` is 0: dialects are pure, and nothing reads them back.
    """
    output = []
    for i, item in enumerate(_output_items(message)):
        prefix = {"message": "msg", "reasoning": "rs", "function_call": "fc"}[item["type"]]
        extra = {"status": "completed"} if item["type"] != "reasoning" else {}
        output.append({"id": f"{prefix}_{message.id}_{i}", **item, **extra})
    truncated = message.stop_reason == "max_tokens"
    return {
        "id": message.id,
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "incomplete" if truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "error": None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage_fields(usage),
    }


def parse_response(body: Any) -> tuple[AssistantMessage, Usage]:
    """The assistant message (arguments exactly as received) and normalized usage; a
    `WireError` for anything that is not a Response."""
    what = "Response"
    body = response_object(body, "output", what)
    blocks: list[Block] = []
    with malformed(what):
        for item in body["output"]:
            if item["type"] == "message":
                blocks.extend(parse_parts(item["content"]))
            elif item["type"] in ("function_call", "reasoning"):
                blocks.append(_parse_output_block(item))
            else:
                raise WireError(f"unsupported Responses output item {item['type']!r}")
        if any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        elif (body.get("incomplete_details") or {}).get("reason") == "max_output_tokens":
            stop = "max_tokens"
        else:
            stop = "end_turn"
        content = with_call_ids(blocks, body)
        message = AssistantMessage(content=content, stop_reason=stop, id=body.get("id", ""))
        usage = parse_usage(body.get("usage") or {})
    return checked(message, usage, what)
