"""Gemini API `generateContent` payloads (REST, camelCase, as `google-genai` sends them).

Render order is tools -> system instruction -> contents; Gemini has no cache markers (its
implicit cache matches prefixes by itself), so `Request.breakpoints` render nothing. A
request that starts from an explicit cache (`Request.cache_object`) names it in
`cachedContent` and sends neither tools, system instruction nor tool config (the API
refuses them beside a cache), nor the messages the cache holds.

Choices made here, and why:

* Tool schemas go in `parametersJsonSchema`, which takes JSON Schema as given (the
  `parameters` field takes Google's OpenAPI subset). A call's `args` keep their order.
* Thought signatures are replayed where they came: a thought part keeps its signature in
  its `ThinkingBlock`; a signature on any other part (Gemini 3 puts one on each function
  call) is stored as a `ThinkingBlock` with no text just before that part's block, and
  rendered back onto the part that follows it.
* A tool result is a `functionResponse` named after its call (Gemini matches by name, and
  by id where ids are sent), its text under `output`, or `error` when it failed.
* Gemini has no `max_tokens: 0` (a keep-warm's): it asks for the one token the API allows
  at least.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
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
from stoker.wire.dialects._chain import ChainMemo, remembered
from stoker.wire.dialects._memo import detached, kept_on
from stoker.wire.dialects._openai_common import memoized_tools, tool_bytes
from stoker.wire.dialects._shape import checked, malformed, model_of, response_object
from stoker.wire.messages import AssistantMessage, Message, UserMessage
from stoker.wire.output import NativeOutput
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "gemini"
_FINISH = {"max_tokens": "MAX_TOKENS"}  # Stoker's stop reasons -> finishReason (else STOP)


def _render_block(block: Block, names: Callable[[str], str]) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"text": block.text}
    if isinstance(block, ThinkingBlock):
        part: dict[str, Any] = {"text": block.thinking, "thought": True}
        if block.signature:
            part["thoughtSignature"] = block.signature
        return part
    if isinstance(block, ToolUseBlock):
        args = block.arguments_or_empty()
        if not isinstance(args, dict):
            args = {}
        return {"functionCall": {"id": block.id, "name": block.name, "args": args}}
    if isinstance(block, ToolResultBlock):
        key = "error" if block.is_error else "output"
        response = {"id": block.tool_use_id, "name": names(block.tool_use_id)}
        return {"functionResponse": {**response, "response": {key: block.content}}}
    if isinstance(block, ImageBlock):
        return {"inlineData": {"mimeType": block.media_type, "data": block.data}}
    if isinstance(block, ImageRefBlock):
        return {"fileData": {"fileUri": block.url or block.file_id}}
    if isinstance(block, DocumentBlock):
        return _render_document(block)
    if isinstance(block, RedactedThinkingBlock):
        return None  # another provider's opaque reasoning: nothing Gemini can read
    raise WireError(f"cannot render block {block!r} for Gemini")


def _render_document(block: DocumentBlock) -> dict[str, Any]:
    media = block.media_type or "application/pdf"
    if block.url or block.file_id:
        return {"fileData": {"mimeType": media, "fileUri": block.url or block.file_id}}
    data = block.data
    if media.startswith("text/"):
        data = base64.b64encode(block.data.encode("utf-8")).decode("ascii")
    return {"inlineData": {"mimeType": media, "data": data}}


def render_parts(blocks: Sequence[Block], names: Callable[[str], str]) -> list[dict[str, Any]]:
    """The parts of a content; a signature-only thinking block goes onto the next part."""
    parts: list[dict[str, Any]] = []
    pending: str | None = None
    for block in blocks:
        if isinstance(block, ThinkingBlock) and not block.thinking and block.signature:
            if pending is not None:
                parts.append({"text": "", "thought": True, "thoughtSignature": pending})
            pending = block.signature
            continue
        part = _render_block(block, names)
        if part is None:
            continue
        if pending is not None:
            part = {**part, "thoughtSignature": pending}
            pending = None
        parts.append(part)
    if pending is not None:
        parts.append({"text": "", "thought": True, "thoughtSignature": pending})
    return parts


def _names_before(messages: Sequence[Message], index: int) -> dict[str, str]:
    """Tool names by call id, from the assistant messages before `index`, nearest first
    (a tool result answers the message just before it, so this stops at once)."""
    names: dict[str, str] = {}
    for i in range(index - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                names.setdefault(call.id, call.name)
            if message.tool_calls:
                break
    return names


def _render_message(messages: Sequence[Message], index: int) -> dict[str, Any]:
    message = messages[index]

    def render() -> dict[str, Any]:
        found = _names_before(messages, index) if isinstance(message, UserMessage) else {}
        role = "model" if isinstance(message, AssistantMessage) else "user"
        parts = render_parts(message.content, lambda call_id: found.get(call_id, call_id))
        return {"role": role, "parts": parts}

    return kept_on(message, NAME, render)


def render_contents(request: Request, start: int = 0) -> list[dict[str, Any]]:
    """The contents of `request.messages[start:]`, each rendered once per message; with
    the request's render memo, only the messages appended since the last request."""
    messages = request.messages
    memo = request.render_memo
    if memo is None:
        return [_render_message(messages, i) for i in range(start, len(messages))]
    count, items, last = memo.get(NAME, (0, [], None))
    if count > len(messages) or (count and messages[count - 1] is not last):
        count, items = 0, []
    for i in range(count, len(messages)):
        items.append(_render_message(messages, i))
    memo[NAME] = (len(messages), items, messages[-1] if messages else None)
    return list(items[start:])


def _tool(name: str, description: str | None, schema: Any) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": name}
    if description is not None:
        declaration["description"] = description
    if schema is not None:
        declaration["parametersJsonSchema"] = schema
    return declaration


def tool_config(params: CacheParams) -> dict[str, Any] | None:
    """`toolConfig` for the prefix's tool choice; None for "auto" (the API default)."""
    choice = params.tool_choice
    if choice == "auto":
        return None
    if choice in ("any", "none"):
        return {"functionCallingConfig": {"mode": choice.upper()}}
    if choice.startswith("tool:"):
        named = [choice.removeprefix("tool:")]
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": named}}
    raise WireError(f"unknown tool_choice {choice!r}; use auto, any, none or tool:NAME")


def render_head(prefix: Prefix) -> dict[str, Any]:
    """What a request sends ahead of its contents, and what an explicit cache holds:
    `tools`, `systemInstruction`, `toolConfig` (only those that are set)."""
    head: dict[str, Any] = {}
    declarations = memoized_tools(prefix, NAME, _tool)
    if declarations:
        head["tools"] = [{"functionDeclarations": declarations}]
    if prefix.system:
        head["systemInstruction"] = {"parts": [{"text": prefix.system}]}
    config = tool_config(prefix.params) if declarations else None
    if config is not None:
        head["toolConfig"] = config
    return head


def _generation(request: Request) -> dict[str, Any]:
    params = request.prefix.params
    config: dict[str, Any] = {"maxOutputTokens": max(request.max_tokens, 1)}
    thinking: dict[str, Any] = {}
    if params.thinking_budget is not None:
        thinking = {"thinkingBudget": params.thinking_budget, "includeThoughts": True}
    if params.effort is not None:  # Gemini 3's thinking levels
        thinking = {**thinking, "thinkingLevel": params.effort, "includeThoughts": True}
    if thinking:
        config["thinkingConfig"] = thinking
    if params.output is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = NativeOutput.from_param(params.output).schema
    return config


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The `generateContent` body for `request`, with the model under `model` (the API
    takes it in the URL: the adapter and the simulator's server move it there); its
    containers are the caller's own unless `shared` (see `stoker.wire.dialects`)."""
    cache = request.cache_object
    body: dict[str, Any] = {"model": request.prefix.params.model}
    if cache is None:
        body.update(render_head(request.prefix))
    else:
        body["cachedContent"] = cache.name
    body["contents"] = render_contents(request, cache.messages if cache else 0)
    body["generationConfig"] = _generation(request)
    if request.stream:
        body["stream"] = True  # not a field of the API: says which method to call
    return body if shared else detached(body)


# -- reading requests (the simulator sees what Gemini sees) -------------------------------

# Values that are free-form JSON (protobuf Struct or a JSON schema): their keys are data.
_FREE = frozenset(
    {
        "args",
        "response",
        "parametersJsonSchema",
        "parameters",
        "responseJsonSchema",
        "responseSchema",
        "labels",
    }
)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def proto_json(value: Any) -> Any:
    """A body as Gemini reads it: protobuf's JSON parser takes a field by its proto name
    (`parameters_json_schema`) as well as its JSON name (`parametersJsonSchema`), and
    google-genai sends some fields the first way; keys inside free-form values (a call's
    `args`, a schema) are data and stay as they are."""
    if isinstance(value, list):
        return [proto_json(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key) if "_" in key else key
        out[name] = item if name in _FREE else proto_json(item)
    return out


def _signed(block: Block, part: dict[str, Any]) -> list[Block]:
    signature = part.get("thoughtSignature")
    if signature is None or part.get("thought"):
        return [block]
    return [ThinkingBlock(thinking="", signature=str(signature)), block]


def _file(data: dict[str, Any]) -> Block:
    uri = str(data["fileUri"])
    media = str(data.get("mimeType") or "")
    if not media or media.startswith("image/"):
        return ImageRefBlock(url=uri)
    return DocumentBlock(media_type=media, url=uri)


def _inline(data: dict[str, Any]) -> Block:
    media, payload = str(data["mimeType"]), str(data["data"])
    if media.startswith("image/"):
        return ImageBlock(media_type=media, data=payload)
    if media.startswith("text/"):
        text = base64.b64decode(payload).decode("utf-8", "replace")
        return DocumentBlock(media_type=media, data=text)
    return DocumentBlock(media_type=media, data=payload)


def call_id(index: int, position: int, call: dict[str, Any]) -> str:
    """An id for a call sent without one: from its place and its call, never random."""
    seed = json.dumps([index, position, call.get("name"), call.get("args")], sort_keys=True)
    return "call_" + hashlib.sha256(seed.encode()).hexdigest()[:24]


def parse_parts(
    parts: list[dict[str, Any]], *, index: int = 0, pending: list[tuple[str, str]] | None = None
) -> list[Block]:
    """Blocks of a content's parts. `pending` holds the (id, name) of calls not answered
    yet: a call sent without an id gets one from `call_id`, and a response sent without
    one takes the id of the first waiting call of its name."""
    waiting = pending if pending is not None else []
    blocks: list[Block] = []
    for position, part in enumerate(parts):
        block: Block
        if "functionCall" in part:
            call = part["functionCall"]
            # a request's call without an id gets one here; a response's from with_call_ids
            given = call.get("id") or (
                call_id(index, position, call) if pending is not None else ""
            )
            args = json.dumps(call.get("args") or {}, ensure_ascii=False, separators=(",", ":"))
            block = ToolUseBlock(id=str(given), name=str(call["name"]), input_json=args)
            waiting.append((block.id, block.name))
        elif "functionResponse" in part:
            block = _result(part["functionResponse"], waiting)
        elif "inlineData" in part:
            block = _inline(part["inlineData"])
        elif "fileData" in part:
            block = _file(part["fileData"])
        elif "text" in part:
            text = str(part["text"])
            if part.get("thought"):
                signature = str(part.get("thoughtSignature") or "")
                blocks.append(ThinkingBlock(thinking=text, signature=signature))
                continue
            block = TextBlock(text=text)
        else:
            raise WireError(f"unsupported Gemini part with keys {sorted(part)}")
        blocks.extend(_signed(block, part))
    return blocks


def _result(response: dict[str, Any], waiting: list[tuple[str, str]]) -> ToolResultBlock:
    name = str(response["name"])
    given = response.get("id")
    if given is None:
        given = next((i for i, n in waiting if n == name), name)
    waiting[:] = [(i, n) for i, n in waiting if i != given]
    body = response.get("response") or {}
    if isinstance(body, dict) and set(body) <= {"output", "error"} and body:
        error = "error" in body and "output" not in body
        value = body["error"] if error else body["output"]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return ToolResultBlock(tool_use_id=str(given), content=text, is_error=error)
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return ToolResultBlock(tool_use_id=str(given), content=text)


def _parse_tool_choice(config: Any) -> str:
    calling = (config or {}).get("functionCallingConfig") or {}
    mode = str(calling.get("mode") or "AUTO").upper()
    allowed = calling.get("allowedFunctionNames") or []
    if mode == "ANY" and len(allowed) == 1:
        return f"tool:{allowed[0]}"
    return {"ANY": "any", "NONE": "none"}.get(mode, "auto")


def _system_text(instruction: Any) -> str:
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    return "".join(str(p.get("text", "")) for p in instruction.get("parts") or ())


def _message_of(item: tuple[int, dict[str, Any], tuple[tuple[str, str], ...]]) -> Message:
    index, content, before = item
    pending = list(before)
    blocks = tuple(parse_parts(content.get("parts") or [], index=index, pending=pending))
    if content.get("role") == "model":
        return AssistantMessage(content=blocks)
    if not blocks:
        raise WireError(f"contents[{index}] has no parts")
    return UserMessage(content=blocks)


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    """Read a `generateContent` body (its explicit cache already in it, see the
    simulator's engine) back into a `Request`."""
    try:
        tools = []
        for tool in body.get("tools") or ():
            for d in tool.get("functionDeclarations") or ():
                schema = d.get("parametersJsonSchema", d.get("parameters"))
                tools.append(tool_bytes(d["name"], d.get("description"), schema))
        config = body.get("generationConfig") or {}
        thinking = config.get("thinkingConfig") or {}
        output = None
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema is not None:
            output = NativeOutput(name="", schema=dict(schema)).to_param()
        params = CacheParams(
            model=model_of(body),
            thinking_budget=thinking.get("thinkingBudget"),
            effort=thinking.get("thinkingLevel"),
            output=output,
            tool_choice=_parse_tool_choice(body.get("toolConfig")),
        )
        messages: list[Message] = []
        waiting: list[tuple[str, str]] = []
        for index, content in enumerate(body["contents"]):
            # Which calls wait for an answer is part of what a content reads as.
            item = (index, content, tuple(waiting))
            message = remembered(memo, NAME, item, False, _message_of)
            if isinstance(message, AssistantMessage):
                waiting = [(c.id, c.name) for c in message.tool_calls]
            else:
                answered = {r.tool_use_id for r in message.tool_results}
                waiting = [(i, n) for i, n in waiting if i not in answered]
            messages.append(message)
        system = _system_text(body.get("systemInstruction"))
        return Request(
            prefix=Prefix(params=params, tools=tuple(tools), system=system),
            messages=tuple(messages),
            max_tokens=int(config.get("maxOutputTokens") or 0),
            stream=bool(body.get("stream", False)),
        )
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise WireError(f"malformed Gemini request: {exc!r}") from exc


# -- responses -----------------------------------------------------------------------------


def usage_fields(usage: Usage, *, thoughts: int = 0) -> dict[str, Any]:
    """`usageMetadata`: promptTokenCount is the WHOLE input, cachedContentTokenCount the
    part of it read from a cache; thoughts are output, counted apart. Zero counts are
    left out, as the API's JSON (proto3) leaves them out."""
    out: dict[str, Any] = {"promptTokenCount": usage.input_total}
    if usage.read:
        out["cachedContentTokenCount"] = usage.read
    visible = usage.output - thoughts
    if visible:
        out["candidatesTokenCount"] = visible
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    out["totalTokenCount"] = usage.input_total + usage.output
    return out


def parse_usage(data: dict[str, Any]) -> Usage:
    """Disjoint buckets from `usageMetadata`. Gemini reports no writes: an implicit
    entry is written at the input price, an explicit cache by its own create call."""
    total = data.get("promptTokenCount") or 0
    read = data.get("cachedContentTokenCount") or 0
    # Tool-use prompt tokens (server tools) are input too; thoughts are billed as output.
    extra = data.get("toolUsePromptTokenCount") or 0
    output = (data.get("candidatesTokenCount") or 0) + (data.get("thoughtsTokenCount") or 0)
    return Usage(uncached=max(total - read, 0) + extra, read=read, output=output)


def render_response(
    message: AssistantMessage, usage: Usage, model: str, *, thoughts: int = 0
) -> dict[str, Any]:
    """A GenerateContentResponse body for `message` (what the simulator answers)."""
    parts = render_parts(message.content, lambda call_id: call_id)
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": parts},
        "finishReason": _FINISH.get(message.stop_reason, "STOP"),
        "index": 0,
    }
    return {
        "candidates": [candidate],
        "usageMetadata": usage_fields(usage, thoughts=thoughts),
        "modelVersion": model,
        "responseId": message.id,
    }


def parse_response(body: Any) -> tuple[AssistantMessage, Usage]:
    """The assistant message (exact parts and signatures) and normalized usage; a
    `WireError` for anything that is not a GenerateContentResponse with a candidate."""
    what = "Gemini response"
    body = response_object(body, "candidates", what)
    with malformed(what):
        if not body["candidates"]:
            feedback = body.get("promptFeedback") or {}
            raise WireError(f"Gemini answered no candidate: {feedback or 'no reason given'}")
        candidate = body["candidates"][0]
        parts = (candidate.get("content") or {}).get("parts") or []
        blocks = with_call_ids(parse_parts(parts), body)
        finish = candidate.get("finishReason") or "STOP"
        if any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        else:
            stop = "max_tokens" if finish == "MAX_TOKENS" else "end_turn"
        message = AssistantMessage(
            content=tuple(blocks), stop_reason=stop, id=str(body.get("responseId") or "")
        )
        usage = parse_usage(body.get("usageMetadata") or {})
    return checked(message, usage, what)
