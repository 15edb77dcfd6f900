"""OpenAI Chat Completions payloads (also what vLLM, SGLang and llama.cpp serve).

Render order is tools -> system message -> history, each message rendered once and
memoized on the message. Choices made here, and why:

* The system prompt is a `system` message, not `developer`: every OpenAI-compatible
  server accepts it, and OpenAI maps it to developer for reasoning models.
* Tool-call `arguments` are `ToolUseBlock.input_json` verbatim: OpenAI hashes the string,
  so whitespace and key order inside it are part of the cache key.
* Tool results are `tool` messages; Chat has no error flag, so `is_error` is dropped and
  the content is sent exactly as it is. Thinking blocks are dropped too: Chat has no
  field for replayed reasoning.
* A lone text block is sent as a plain string, the one form every server's chat
  template takes for every role; a `prompt_cache_breakpoint` (GPT-5.6+) turns only the
  marked message into a list of parts, which OpenAI renders to the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable
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
    Anchor,
    Event,
    Rendered,
    apply_breakpoints,
    arguments_text,
    cache_fields,
    data_url,
    file_fields,
    memoized,
    memoized_tools,
    openai_marker,
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

NAME = "openai_chat"


def _part(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image_url", "image_url": {"url": data_url(block)}}
    if isinstance(block, ImageRefBlock):
        if not block.url:
            raise WireError("Chat Completions takes an image by URL or data, not by file id")
        image = {"url": block.url, **({"detail": block.detail} if block.detail else {})}
        return {"type": "image_url", "image_url": image}
    if isinstance(block, DocumentBlock):
        return {"type": "file", "file": file_fields(block, url_key=None)}
    raise WireError(f"cannot render {block.kind} block in a Chat Completions user message")


def _result(block: ToolResultBlock) -> tuple[dict[str, Any], str]:
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": block.content}, "content"


def _assistant(message: AssistantMessage) -> Rendered:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    anchors: list[Anchor | None] = []
    for block in message.content:
        anchors.append((0, "content", len(parts)) if isinstance(block, TextBlock) else None)
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolUseBlock):
            function = {"name": block.name, "arguments": block.input_json}
            calls.append({"id": block.id, "type": "function", "function": function})
        elif not isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            raise WireError(f"cannot render {block.kind} block in a Chat assistant message")
    item: dict[str, Any] = {"role": "assistant", "content": plain(parts) if parts else None}
    if calls:
        item["tool_calls"] = calls
    return Rendered(items=[item], anchors=tuple(anchors))


def _rendered(message: Message) -> Rendered:
    return memoized(message, NAME, _assistant, lambda m: render_user(m, _result, _part))


def _tool(name: str, description: str | None, parameters: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if description is not None:
        function["description"] = description
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def _named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def render_request(
    request: Request,
    *,
    shared: bool = False,
    marker: tuple[str, Callable[[str], Any]] = ("prompt_cache_breakpoint", openai_marker),
) -> dict[str, Any]:
    """The body of `client.chat.completions.create(**body)` for `request`; its containers
    are the caller's own unless `shared` (see `stoker.wire.dialects`). `marker` is the
    field a breakpoint puts on a content part and its value per TTL (a compatible API's
    own, e.g. OpenRouter's `cache_control`)."""
    prefix = request.prefix
    params: CacheParams = prefix.params
    system = [{"role": "system", "content": prefix.system}] if prefix.system else []
    messages = system + rendered_history(request, NAME, lambda m: _rendered(m).items)
    apply_breakpoints(
        request,
        messages,
        system_at=0 if system else None,
        rendered=_rendered,
        text_type="text",
        name=marker[0],
        marker_of=marker[1],
    )
    body: dict[str, Any] = {"model": params.model}
    tools = memoized_tools(prefix, NAME, _tool)
    if tools:
        body["tools"] = tools
        tool_params(body, params, _named)
    body["messages"] = messages
    if params.effort is not None:
        body["reasoning_effort"] = params.effort
    if params.output is not None:
        native = NativeOutput.from_param(params.output)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": native.name, "schema": native.schema, "strict": False},
        }
    body["max_completion_tokens"] = request.max_tokens
    cache_fields(body, request)
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}  # usage is omitted from streams otherwise
    return body if shared else detached(body)


def _assistant_blocks(message: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    # vLLM, SGLang and DeepSeek return reasoning as `reasoning_content` beside the content.
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ThinkingBlock(thinking=reasoning))
    content = message.get("content")
    if content is not None:
        blocks.extend(parse_parts(content))
    elif isinstance(message.get("refusal"), str):
        blocks.append(TextBlock(text=message["refusal"]))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        args = arguments_text(function.get("arguments", ""))
        # Some compatible servers omit the id or send null; a response's calls get one
        # from `with_call_ids`.
        call_id = call.get("id") or ""
        blocks.append(ToolUseBlock(id=call_id, name=function["name"], input_json=args))
    return blocks


def _message_event(m: dict[str, Any]) -> Event:
    role = m["role"]
    if role in ("system", "developer"):
        return "system", text_of(m.get("content")), False, role
    if role == "user":
        return "user", tuple(parse_parts(m["content"])), True, role
    if role == "tool":
        result = ToolResultBlock(tool_use_id=m["tool_call_id"], content=text_of(m.get("content")))
        return "user", (result,), False, role
    if role == "assistant":
        return "assistant", tuple(_assistant_blocks(m)), True, role
    raise WireError(f"unexpected role {role!r} in messages")


def _output(fmt: Any) -> str | None:
    """A `response_format` of a JSON schema as the prefix holds it (other formats: None)."""
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema") or {}
    return NativeOutput(name=str(spec.get("name", "")), schema=spec.get("schema") or {}).to_param()


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    """Read a Chat Completions body back into a `Request` (what the simulator's model sees)."""
    try:
        messages, system = replay(body["messages"], _message_event, memo, trusted, NAME)
        tools = []
        for t in body.get("tools") or ():
            fn = t["function"]
            tools.append(tool_bytes(fn["name"], fn.get("description"), fn.get("parameters")))
        params = CacheParams(
            model=model_of(body),
            effort=body.get("reasoning_effort"),
            output=_output(body.get("response_format")),
            tool_choice=parse_tool_choice(body.get("tool_choice")),
            parallel_tool_calls=body.get("parallel_tool_calls", True) is not False,
        )
        return Request(
            prefix=Prefix(params=params, tools=tuple(tools), system="\n".join(system)),
            messages=messages,
            # `max_tokens` is the deprecated name most local servers still read.
            max_tokens=int(body.get("max_completion_tokens") or body.get("max_tokens") or 0),
            cache_key=body.get("prompt_cache_key"),
            cache_retention=body.get("prompt_cache_retention"),
            stream=bool(body.get("stream", False)),
        )
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        # ValueError / OverflowError: a number where text belongs, an infinite max_tokens
        raise WireError(f"malformed Chat Completions request: {exc!r}") from exc


def usage_fields(usage: Usage) -> dict[str, Any]:
    """Usage under Chat's names: prompt_tokens is the TOTAL input, cached and written included."""
    return {
        "prompt_tokens": usage.input_total,
        "completion_tokens": usage.output,
        "total_tokens": usage.input_total + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.read, "cache_write_tokens": usage.written},
    }


def parse_usage(data: dict[str, Any], timings: dict[str, Any] | None = None) -> Usage:
    """Disjoint buckets from Chat usage; Chat has one write bucket, counted as short-TTL."""
    # vLLM omits prompt_tokens_details without --enable-prompt-tokens-details; some send null.
    details = data.get("prompt_tokens_details") or {}
    read = details.get("cached_tokens")
    if read is None:  # DeepSeek reports hits at the top level of usage
        read = data.get("prompt_cache_hit_tokens")
    if read is None and timings:  # older llama.cpp builds report only timings.cache_n
        read = timings.get("cache_n")
    read = read or 0
    # Only GPT-5.6+ and OpenRouter report writes; older models and local servers write free.
    written = details.get("cache_write_tokens") or 0
    total = data.get("prompt_tokens") or 0
    return Usage(
        # Clamped: a server counting only evaluated tokens in prompt_tokens would go negative.
        uncached=max(total - read - written, 0),
        written_5m=written,
        read=read,
        output=data.get("completion_tokens") or 0,
    )


_FINISH = {"tool_use": "tool_calls", "max_tokens": "length"}


def render_response(
    message: AssistantMessage,
    usage: Usage,
    model: str,
    *,
    usage_of: Callable[[Usage], dict[str, Any]] = usage_fields,
) -> dict[str, Any]:
    """A ChatCompletion body for `message`, its usage under `usage_of`'s names (a
    compatible server's own). `created` is 0: dialects are pure, with no clock."""
    item = _assistant(message).items[0]
    content = item["content"]
    return {
        "id": message.id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    **item,
                    # A completion's content is one string, never a list of parts.
                    "content": content if not isinstance(content, list) else text_of(content),
                    "refusal": None,
                },
                "finish_reason": _FINISH.get(message.stop_reason, "stop"),
                "logprobs": None,
            }
        ],
        "usage": usage_of(usage),
    }


def parse_response(body: Any) -> tuple[AssistantMessage, Usage]:
    """The assistant message (arguments exactly as received) and normalized usage; a
    `WireError` for anything that is not a ChatCompletion."""
    what = "ChatCompletion"
    body = response_object(body, "choices", what)
    with malformed(what):
        choice = body["choices"][0]
        blocks = _assistant_blocks(choice["message"])
        if any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        else:
            stop = "max_tokens" if choice.get("finish_reason") == "length" else "end_turn"
        content = with_call_ids(blocks, body)
        message = AssistantMessage(content=content, stop_reason=stop, id=body.get("id", ""))
        usage = parse_usage(body.get("usage") or {}, body.get("timings"))
    return checked(message, usage, what)
