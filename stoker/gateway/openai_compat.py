"""`POST /v1/chat/completions`, so existing chat clients talk to a gateway session.

OpenAI clients resend the whole conversation each time; the gateway already holds it,
so the request's history only says which session it continues (`openai_history.py`)
and its trailing user messages are the new message. A client's system messages are
left out: the prefix is frozen server-side, and a client-side system prompt would move
it. `model` picks the model of a new session; an existing session keeps its own (switch
with a "/model NAME" message), so a client that sends a placeholder name never breaks
the cache by accident.

Tools are the gateway's, run server-side. A client's own `tools` (or tool messages in
its history) are refused with a 400 that says so, never ignored: the model would not
know of them, and the client would wait for calls that never come. Usage carries the
cache: `prompt_tokens_details.cached_tokens` (read) and `cache_write_tokens`, OpenAI's
names, and `x_stoker` with the write TTLs and the cost; a stream asked for usage
(`stream_options.include_usage`) says `"usage": null` on every chunk but its last,
which has no choices and the usage, as OpenAI's does. `stop`, `max_tokens` and
`max_completion_tokens` cut the answer the client receives, never the agent's own
model calls (`openai_limits.py`). Errors are OpenAI's shape, and every response has an
`x-request-id` (`openai_errors.py`).

`/v1/models` lists the gateway's default model, and `/v1/models/{id}` answers it (any
other id is OpenAI's 404 `model_not_found`). Its `created` is 0, the Unix epoch, always:
the gateway does not know when the provider made the model, and a value that moves (the
start time, the request time) would differ between replicas and restarts, so a client
that compares or caches the list would see a change where there is none.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from stoker.agent.output import OutputSpec
from stoker.errors import ConfigError
from stoker.gateway.errors import InvalidParam
from stoker.gateway.http import app_state, read_body, user_of
from stoker.gateway.openai_errors import ModelNotFound, from_stream_error, openai_errors, request_id
from stoker.gateway.openai_history import SESSION_HEADER, Conversation, Said, continued_in, exchange
from stoker.gateway.openai_limits import Cutter, Limits, smallest, stop_sequences, token_limit
from stoker.gateway.sse import HEADERS as SSE_HEADERS
from stoker.gateway.sse import Event, encode
from stoker.gateway.views import Reply
from stoker.wire.dialects import openai_chat
from stoker.wire.usage import Usage

log = logging.getLogger(__name__)

MODEL_CREATED = 0  # `created` of every model listed: unknown (see the module docstring)

CLIENT_TOOLS = (
    "this gateway runs its own tools server-side and cannot hand tool calls to the "
    "client; send the request without {what} (the gateway's tools are already offered "
    "to the model)"
)


class ContentPart(BaseModel):
    """One part of a message's content. Text parts are sent on, and the new message's
    image parts (data: URLs) as images after its text; the others (audio, files) are
    accepted and left out. A text part's `text` must be a string: the model would
    otherwise be sent "None" or a dict's repr."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_part_has_text(self) -> ContentPart:
        if self.type in ("text", "input_text", "output_text") and self.text is None:
            raise ValueError(f"a part of type {self.type!r} needs 'text', a string")
        return self


def _content_kind(value: Any) -> str | None:
    return "text" if isinstance(value, str) else "parts" if isinstance(value, list) else None


# A string or a list of parts, told apart by the value's type, so that a bad part gets one
# error ("content.parts.0.text: ...") rather than one per shape content could have had.
Content = Annotated[
    Annotated[str, Tag("text")] | Annotated[list[ContentPart], Tag("parts")],
    Discriminator(
        _content_kind,
        custom_error_type="content_type",
        custom_error_message="content must be a string, a list of parts, or null",
    ),
]


IMAGE_PARTS = frozenset({"image_url", "input_image"})  # Chat Completions', Responses'


def image_urls(content: str | list[ContentPart] | None) -> tuple[object, ...]:
    """The URLs of a message's image parts, as sent (`{"url": ...}` or the string)."""
    urls: list[object] = []
    for part in content if isinstance(content, list) else ():
        if part.type in IMAGE_PARTS:
            url = (part.model_extra or {}).get("image_url")
            urls.append(url.get("url") if isinstance(url, dict) else url)
    return tuple(urls)


def text_of(content: str | list[ContentPart] | None) -> str:
    """A message's text: its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content or () if p.text is not None and "text" in p.type)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name & co.
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Content | None = None
    tool_calls: list[Any] | None = None
    function_call: Any = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature & co. are accepted and ignored
    model: str | None = Field(default=None, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    response_format: dict[str, Any] | None = None
    n: int | None = None
    # Checked by `limits`, which names the field at fault.
    stop: Any = None
    max_tokens: Any = None
    max_completion_tokens: Any = None

    def limits(self) -> Limits:
        """What the request asks of its answer (a 400 naming the field if it is invalid)."""
        return Limits(
            stop=stop_sequences(self.stop),
            max_tokens=smallest(
                token_limit(self.max_tokens, "max_tokens"),
                token_limit(self.max_completion_tokens, "max_completion_tokens"),
            ),
        )


def structured_output(output_format: Any, param: str, *, nested: bool) -> OutputSpec[Any] | None:
    """The JSON the client asks the answer to be (`json_schema` or `json_object`; None for
    text). The agent's tools stay usable on the way; only its final answer is JSON of the
    schema, validated, and the schema travels in the new message, so the session's prefix
    never moves for a client's format (docs/provider-caching.md). Chat nests the schema
    under `json_schema`; Responses puts it beside `type`."""
    if output_format is None:
        return None
    kind = output_format.get("type") if isinstance(output_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputSpec.from_schema({"type": "object"}, "json_object")
    if kind != "json_schema":
        raise InvalidParam(
            f"{param}.type must be text, json_object or json_schema, not {str(kind)[:40]!r}",
            param=f"{param}.type",
            code="invalid_value",
        )
    spec = output_format.get("json_schema") if nested else output_format
    schema = spec.get("schema") if isinstance(spec, dict) else None
    where = f"{param}.json_schema.schema" if nested else f"{param}.schema"
    if not isinstance(schema, dict):
        raise InvalidParam(f"{where} must be a JSON schema object", param=where)
    try:
        return OutputSpec.from_schema(schema, str(spec.get("name") or "output"))
    except ConfigError as exc:
        raise InvalidParam(str(exc), param=where, code="invalid_json_schema") from exc


def conversation(body: ChatRequest) -> Conversation:
    """The request's user and assistant messages; what the gateway cannot honour (client
    tools, several choices) is refused here."""
    if body.n not in (None, 1):
        raise InvalidParam("n must be 1: the gateway gives one answer per message", param="n")
    for field in ("tools", "functions"):
        if getattr(body, field):
            raise InvalidParam(
                CLIENT_TOOLS.format(what=f"`{field}`"), param=field, code="client_tools_unsupported"
            )
    said = []
    for i, m in enumerate(body.messages):
        if m.role in ("tool", "function") or m.tool_calls or m.function_call:
            raise InvalidParam(
                CLIENT_TOOLS.format(what="tool calls and tool results in `messages`"),
                param=f"messages[{i}]",
                code="client_tools_unsupported",
            )
        if m.role in ("user", "assistant"):
            said.append(Said(role=m.role, text=text_of(m.content), images=image_urls(m.content)))
    return Conversation(messages=tuple(said))


def usage_fields(usage: Usage, cost_usd: float | None) -> dict[str, Any]:
    """Chat usage with the cache in OpenAI's names, and what they do not say in
    `x_stoker`: the writes by TTL, the uncached rest, and the cost."""
    return {**openai_chat.usage_fields(usage), "x_stoker": extension(usage, cost_usd)}


def extension(usage: Usage, cost_usd: float | None) -> dict[str, Any]:
    return {
        "cache_read_tokens": usage.read,
        "cache_write_5m_tokens": usage.written_5m,
        "cache_write_1h_tokens": usage.written_1h,
        "uncached_tokens": usage.uncached,
        "cost_usd": cost_usd,
    }


def _finish(reply: Reply, cut: str | None) -> str:
    """The finish reason: the client's limit that cut the answer, else the turn's own."""
    return cut or ("length" if reply.exit == "budget_exhausted" else "stop")


@openai_errors
async def chat_completions(request: Request) -> Response:
    user_of(request)  # a 401 before anything about the body
    body = await read_body(request, ChatRequest)
    turn = await exchange(
        request,
        conversation(body),
        param="messages",
        model=body.model,
        limits=body.limits(),
        output=structured_output(body.response_format, "response_format", nested=True),
    )
    completion_id = "chatcmpl-" + secrets.token_hex(12)
    created = int(time.time())
    if body.stream:
        events = await turn.events()
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        chunks = _Chunks(
            completion_id=completion_id,
            created=created,
            model=turn.model,
            include_usage=include_usage,
            request_id=request_id(request),
        )
        stream = chunks.stream(events, turn.limits.cutter())
        headers = {**SSE_HEADERS, SESSION_HEADER: turn.session_id}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    reply, timing = await turn.answer()
    cut = turn.limits.cut(reply.text)
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": turn.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": cut.text, "refusal": None},
                    "finish_reason": _finish(reply, cut.reason),
                    "logprobs": None,
                }
            ],
            "usage": usage_fields(reply.usage, reply.cost_usd),
        },
        headers={**timing, SESSION_HEADER: continued_in(reply)},
    )


class _Chunks:
    """The chunks of one streamed completion, from a turn's events."""

    def __init__(
        self,
        *,
        completion_id: str,
        created: int,
        model: str,
        include_usage: bool,
        request_id: str | None,
    ) -> None:
        self.base: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
        }
        if include_usage:  # null until the last chunk, which has it
            self.base["usage"] = None
        self.include_usage = include_usage
        self.request_id = request_id

    def chunk(
        self, delta: dict[str, Any], finish: str | None = None, session: str | None = None
    ) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        frame: dict[str, Any] = {**self.base, "choices": [choice]}
        if session:  # /new, /reset, /clear: the conversation continues in this session
            frame["x_stoker_session"] = session
        return encode(None, frame)

    async def stream(self, events: AsyncIterator[Event], cutter: Cutter) -> AsyncIterator[bytes]:
        yield self.chunk({"role": "assistant", "content": ""})
        async for event, data in events:
            if event == "text":
                if text := cutter.feed(data["delta"]):
                    yield self.chunk({"content": text})
            elif event == "error":
                error = from_stream_error(data)
                log.info(
                    "request %s: the streamed answer failed (%s)", self.request_id, error["code"]
                )
                yield encode(None, {"error": error})
            elif event == "done":
                reply = Reply.from_dict(data)
                # The rest of the answer: all of it for a command or a replayed retry,
                # which stream no deltas.
                rest = cutter.finish(reply.text)
                if rest.text:
                    yield self.chunk({"content": rest.text})
                yield self.chunk({}, _finish(reply, rest.reason), session=reply.new_session_id)
                if self.include_usage:
                    usage = usage_fields(reply.usage, reply.cost_usd)
                    yield encode(None, {**self.base, "choices": [], "usage": usage})
        yield encode(None, "[DONE]")


def model_entry(model: str) -> dict[str, Any]:
    """A model as `/v1/models` lists it (OpenAI's `Model`)."""
    return {"id": model, "object": "model", "created": MODEL_CREATED, "owned_by": "stoker"}


@openai_errors
async def models(request: Request) -> Response:
    user_of(request)
    served = app_state(request).gateway.defaults.model
    return JSONResponse({"object": "list", "data": [model_entry(served)]})


@openai_errors
async def model(request: Request) -> Response:
    """`/v1/models/{model}`: the served model, or OpenAI's 404 `model_not_found`."""
    user_of(request)
    served = app_state(request).gateway.defaults.model
    if request.path_params["model"] != served:
        raise ModelNotFound(request.path_params["model"], served)
    return JSONResponse(model_entry(served))
