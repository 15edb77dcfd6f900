"""The simulator's Chat Completions API: what it refuses, what it reads, what it answers.

A request may hold only a system or developer message (OpenAI answers it); an empty
`messages` is a 400. `n` choices come back (the simulator's model is deterministic, so
they say the same thing), `stop` cuts the text before the sequence, `max_tokens` /
`max_completion_tokens` cut it at the limit with `finish_reason: "length"`, reasoning
models report `completion_tokens_details.reasoning_tokens`, and `logprobs` are returned
when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stoker.cache.models import ModelInfo
from stoker.providers.sim import api_openai as oa
from stoker.providers.sim.answer import Reply
from stoker.providers.sim.asks import (
    Ask,
    integer,
    refuse,
    schema_format,
    stop_strings,
    tool_names,
)
from stoker.wire.dialects import openai_chat

P = oa.P


def _messages(body: Mapping[str, Any]) -> list[Any]:
    messages = body.get("messages")
    if messages is None:
        refuse(
            P, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    if not isinstance(messages, list):
        refuse(P, "Invalid type for 'messages': expected an array.", "messages", "invalid_type")
    if not messages:
        refuse(
            P,
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            "messages",
            "empty_array",
        )
    return messages


def _media_only_from_users(messages: list[Any]) -> None:
    """Images and files only in user messages, as OpenAI requires."""
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") == "user":
            continue
        content = m.get("content")
        for j, part in enumerate(content if isinstance(content, list) else ()):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in ("image_url", "file", "input_audio"):
                what = "Image URLs" if kind == "image_url" else f"'{kind}' content parts"
                refuse(
                    P,
                    f"{what} are only allowed for messages with role 'user', but this message "
                    f"with role '{m.get('role')}' contains one.",
                    f"messages.[{i}].content.[{j}].type",
                    "invalid_value",
                )


def _mentions_json(messages: list[Any]) -> bool:
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        texts = (
            [content]
            if isinstance(content, str)
            else [p.get("text", "") for p in content or () if isinstance(p, Mapping)]
        )
        if any("json" in str(t).lower() for t in texts):
            return True
    return False


def _limit(body: Mapping[str, Any], info: ModelInfo) -> int | None:
    legacy = integer(P, body, "max_tokens", low=1)
    newer = integer(P, body, "max_completion_tokens", low=1)
    if legacy is not None and info.reasons:
        oa.unsupported("max_tokens", " Use 'max_completion_tokens' instead.")
    return newer if newer is not None else legacy


def _logprobs(body: Mapping[str, Any], info: ModelInfo) -> int | None:
    wanted = body.get("logprobs")
    top = integer(P, body, "top_logprobs", low=0, high=20)
    if top is not None and wanted is not True:
        refuse(
            P,
            "Invalid value for 'top_logprobs': 'logprobs' must be set to true to use it.",
            "top_logprobs",
            "invalid_value",
        )
    if wanted is not True:
        return None
    if info.reasons:
        oa.unsupported("logprobs")
    return top or 0


def ask(body: Mapping[str, Any], info: ModelInfo) -> Ask:
    """What `body` asks of its answer, refusing it as Chat Completions would."""
    messages = _messages(body)
    _media_only_from_users(messages)
    oa.sampling(body, info)
    n = integer(P, body, "n", low=1, high=128) or 1
    stops = stop_strings(P, body.get("stop"), "stop", most=4)
    if stops and info.reasons:
        oa.unsupported("stop")
    oa.effort(body.get("reasoning_effort"), "reasoning_effort", info)
    if body.get("stream_options") is not None and body.get("stream") is not True:
        refuse(
            P,
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            "invalid_value",
        )
    output = schema_format(P, body.get("response_format"), "response_format", nested=True)
    if output is not None and output.kind == "json_object" and not _mentions_json(messages):
        refuse(
            P,
            "'messages' must contain the word 'json' in some form, to use 'response_format' of "
            "type 'json_object'.",
            "messages",
            "invalid_value",
        )
    tools = tool_names(P, body.get("tools"), "tools", lambda t: t.get("function"))
    choice = body.get("tool_choice")
    named = (choice.get("function") or {}).get("name") if isinstance(choice, Mapping) else None
    return Ask(
        max_tokens=_limit(body, info),
        stop=stops,
        n=n,
        output=output,
        forced_tool=oa.forced_tool(choice, tools, named),
        reasoning=info.reasons and body.get("reasoning_effort") != "none",
        logprobs=_logprobs(body, info),
    )


def response(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The ChatCompletion: the dialect's rendering, `n` times, with the API's ids, times,
    output details and log probabilities."""
    ask, answer, usage = reply.ask, reply.answer, reply.usage
    out = openai_chat.render_response(reply.message, usage, reply.model)
    choice = out["choices"][0]
    if ask.logprobs is not None:
        text = choice["message"].get("content") or ""
        choice["logprobs"] = {
            "content": oa.logprobs(text, reply.tokens, ask.logprobs),
            "refusal": None,
        }
    out["choices"] = [{**choice, "index": i} for i in range(ask.n)]
    output = answer.output_tokens * ask.n
    out["usage"] = {
        **out["usage"],
        "completion_tokens": output,
        "total_tokens": usage.input_total + output,
        "completion_tokens_details": {
            "reasoning_tokens": answer.reasoning_tokens * ask.n,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    out.update(created=reply.created, service_tier="default", system_fingerprint="fp_sim")
    return out
