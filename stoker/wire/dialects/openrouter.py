"""OpenRouter's Chat Completions payloads (`https://openrouter.ai/api/v1`, the OpenAI SDK).

The body is Chat Completions' (`stoker.wire.dialects.openai_chat`) with OpenRouter's
additions (docs/provider-caching.md, "OpenRouter"):

* A breakpoint is Anthropic's `cache_control` on a content part: OpenRouter passes it to
  Claude as is, converts it to `prompt_cache_breakpoint` for GPT-5.6+ (dropping the TTL),
  and uses the last one for Gemini. A 5-minute marker names no TTL (the default).
* The lineage's key is sent as `session_id`, OpenRouter's sticky-routing key: the
  session, its forks and sub-agents go to the upstream provider that holds their cache,
  from the first request on.
* `usage: {"include": true}` asks for the usage accounting: `usage.cost` (credits, USD)
  and `cost_details`, read by `reported_cost`.

`anthropic_equivalent(body)` is the Messages body OpenRouter sends Claude for a body,
and `openai_equivalent(body)` the Chat body it sends an OpenAI model: the simulator
accounts each upstream's cache on what that upstream receives.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from stoker.errors import WireError
from stoker.wire.dialects import openai_chat
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.dialects._shape import malformed
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "openrouter_chat"
DEFAULT_MAX_TOKENS = 4096
# Fields OpenRouter reads and the upstream never sees.
OWN_FIELDS = ("session_id", "provider", "usage", "transforms", "models", "route", "cache_control")


def cache_control(ttl: str) -> dict[str, str]:
    """Anthropic's marker as OpenRouter takes it (5 minutes is the default TTL)."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def render_request(request: Request, *, shared: bool = False) -> dict[str, Any]:
    """The body of `client.chat.completions.create(**body)` on OpenRouter."""
    body = openai_chat.render_request(
        request, shared=shared, marker=("cache_control", cache_control)
    )
    key = body.pop("prompt_cache_key", None)
    body.pop("prompt_cache_retention", None)  # OpenAI's; OpenRouter keeps its own routing
    # OpenRouter documents `max_tokens`; the upstream gets what its API calls it.
    body["max_tokens"] = body.pop("max_completion_tokens")
    if key is not None:
        body["session_id"] = key
    body["usage"] = {"include": True}
    return body


def parse_request(
    body: dict[str, Any], *, memo: ChainMemo | None = None, trusted: bool = False
) -> Request:
    """Read an OpenRouter body back into a `Request` (markers are read by the accountant)."""
    request = openai_chat.parse_request(body, memo=memo, trusted=trusted)
    if not request.max_tokens and body.get("max_tokens"):
        request = replace(request, max_tokens=int(body["max_tokens"]))
    return request


def session_key(body: dict[str, Any], header: str | None = None) -> str | None:
    """The sticky-routing key a request names: `session_id` in the body (it wins), the
    `x-session-id` header, else `prompt_cache_key`."""
    for found in (body.get("session_id"), header, body.get("prompt_cache_key")):
        if isinstance(found, str) and found:
            return found[:256]
    return None


def conversation(body: dict[str, Any]) -> str:
    """What identifies a conversation without a key: the first system (or developer)
    message and the first other message, as OpenRouter hashes them."""
    messages = body.get("messages") or []
    first_system = next(
        (m for m in messages if isinstance(m, dict) and m.get("role") in ("system", "developer")),
        None,
    )
    first_other = next(
        (
            m
            for m in messages
            if isinstance(m, dict) and m.get("role") not in ("system", "developer")
        ),
        None,
    )
    return json.dumps([first_system, first_other], sort_keys=True, ensure_ascii=False)


# --- what each upstream receives -------------------------------------------------------


def _parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content if isinstance(p, dict)]


def _with_marker(block: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    marker = part.get("cache_control")
    if marker is None:
        return block
    return {**block, "cache_control": {"type": "ephemeral", "ttl": marker.get("ttl") or "5m"}}


def _image(part: dict[str, Any]) -> dict[str, Any]:
    url = part["image_url"]
    url = url["url"] if isinstance(url, dict) else url
    head, sep, data = url.partition(",")
    if head.startswith("data:") and head.endswith(";base64") and sep:
        source = {"type": "base64", "media_type": head[5:-7], "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def _user_block(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        block: dict[str, Any] = {"type": "text", "text": part["text"]}
    elif kind == "image_url":
        block = _image(part)
    elif kind == "file":
        file = part["file"]
        data = str(file.get("file_data", ""))
        media, _, raw = data.partition(";base64,")
        source = {"type": "base64", "media_type": media.removeprefix("data:"), "data": raw}
        block = {"type": "document", "source": source}
    else:
        raise WireError(f"OpenRouter cannot send a {kind!r} part to Claude")
    return _with_marker(block, part)


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(str(p.get("text", "")) for p in parts)


def anthropic_equivalent(body: dict[str, Any]) -> dict[str, Any]:
    """The Messages body Claude receives for an OpenRouter Chat body: tools, system
    messages as system blocks, tool messages as tool results in the user turn, each
    `cache_control` on the block it marks; consecutive turns of one role joined."""
    with malformed("OpenRouter request"):
        tools = []
        for tool in body.get("tools") or ():
            fn = tool["function"]
            out: dict[str, Any] = {"name": fn["name"]}
            if fn.get("description") is not None:
                out["description"] = fn["description"]
            out["input_schema"] = fn.get("parameters") or {}
            tools.append(_with_marker(out, tool))
        system: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []

        def add(role: str, blocks: list[dict[str, Any]]) -> None:
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": list(blocks)})

        for message in body["messages"]:
            role = message["role"]
            parts = _parts(message.get("content"))
            if role in ("system", "developer"):
                system.extend(_with_marker({"type": "text", "text": p["text"]}, p) for p in parts)
            elif role == "user":
                add("user", [_user_block(p) for p in parts])
            elif role == "tool":
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": message["tool_call_id"],
                    "content": _text(parts),
                }
                marked = next((p for p in parts if "cache_control" in p), {})
                add("user", [_with_marker(result, marked)])
            elif role == "assistant":
                blocks = [_with_marker({"type": "text", "text": p["text"]}, p) for p in parts]
                for call in message.get("tool_calls") or ():
                    fn = call["function"]
                    args = fn.get("arguments") or "{}"
                    given = json.loads(args) if isinstance(args, str) else args
                    blocks.append(
                        {"type": "tool_use", "id": call["id"], "name": fn["name"], "input": given}
                    )
                add("assistant", blocks)
            else:
                raise WireError(f"unexpected role {role!r} in messages")
        out = {
            "model": body.get("model"),
            "max_tokens": body.get("max_tokens")
            or body.get("max_completion_tokens")
            or DEFAULT_MAX_TOKENS,
        }
        if tools:
            out["tools"] = tools
        if system:
            out["system"] = system
        out["messages"] = turns
        choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None:
            out["tool_choice"] = choice
        if isinstance(body.get("cache_control"), dict):  # automatic caching
            top = body["cache_control"]
            out["cache_control"] = {"type": "ephemeral", "ttl": top.get("ttl") or "5m"}
        return out


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    out: dict[str, Any] | None
    if choice in (None, "auto"):
        out = {"type": "auto"} if parallel is False else None
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    else:
        out = {"type": "tool", "name": choice["function"]["name"]}
    if out is not None and parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def openai_equivalent(body: dict[str, Any]) -> dict[str, Any]:
    """The Chat body an OpenAI model receives: each `cache_control` as an explicit
    `prompt_cache_breakpoint` (OpenRouter drops the TTL), OpenRouter's own fields gone."""

    def convert(part: Any) -> Any:
        if not isinstance(part, dict) or "cache_control" not in part:
            return part
        rest = {k: v for k, v in part.items() if k != "cache_control"}
        return {**rest, "prompt_cache_breakpoint": {"mode": "explicit"}}

    messages = []
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            message = {**message, "content": [convert(p) for p in content]}
        messages.append(message)
    out = {k: v for k, v in body.items() if k not in OWN_FIELDS}
    out["messages"] = messages
    return out


# --- responses -------------------------------------------------------------------------


def usage_fields(usage: Usage, cost: float | None) -> dict[str, Any]:
    """Usage under OpenRouter's names: Chat's (prompt_tokens is the total), the cache
    write count, and the cost in USD when the model is priced."""
    out: dict[str, Any] = {
        **openai_chat.usage_fields(usage),
        "prompt_tokens_details": {
            "cached_tokens": usage.read,
            "cache_write_tokens": usage.written,
            "audio_tokens": 0,
            "video_tokens": 0,
        },
        "completion_tokens_details": {"reasoning_tokens": 0, "image_tokens": 0},
    }
    if cost is not None:
        out["cost"] = round(cost, 10)
        out["is_byok"] = False
        out["cost_details"] = {"upstream_inference_cost": round(cost, 10)}
    return out


# An answer is Chat Completions' (`cached_tokens`, `cache_write_tokens` in the details).
render_response = openai_chat.render_response
parse_response = openai_chat.parse_response


def reported_cost(body: Any) -> float | None:
    """What OpenRouter says the call cost (`usage.cost`, USD), when it says so."""
    usage = body.get("usage") if isinstance(body, dict) else None
    cost = usage.get("cost") if isinstance(usage, dict) else None
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return None
    return float(cost)
