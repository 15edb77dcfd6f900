"""`POST /v1/chat/completions`, so existing chat clients talk to a gateway session.

OpenAI clients resend the whole conversation each time; the gateway already holds it,
so only the newest user message is taken and the rest is ignored (as are a client's
system messages: the prefix is frozen server-side, and a client-side system prompt
would move it). Continuity is the `X-Stoker-Session` header: without it a new session
is created and its id returned in the same header. `model` picks the model of a new
session; an existing session keeps its own (switch with a "/model NAME" message), so a
client that sends a placeholder name never breaks the cache by accident.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from stoker.agent.seams import Callbacks
from stoker.gateway.errors import BadRequest
from stoker.gateway.http import app_state, idempotency_key, read_body, user_of
from stoker.gateway.sse import HEADERS as SSE_HEADERS
from stoker.gateway.sse import Event, encode, turn_events
from stoker.gateway.timing import timed
from stoker.gateway.views import Reply

SESSION_HEADER = "X-Stoker-Session"
_PLACEHOLDERS = frozenset({"", "stoker", "default"})


class ContentPart(BaseModel):
    """One part of a message's content. Only text parts are sent on; the others (images,
    audio, files) are accepted and left out, but a text part's `text` must be a string:
    the model would otherwise be sent "None" or a dict's repr."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_part_has_text(self) -> ContentPart:
        if self.type == "text" and self.text is None:
            raise ValueError("a part of type 'text' needs 'text', a string")
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


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls & co.
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Content | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature & co. are accepted and ignored
    model: str | None = Field(default=None, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None


def newest_user_text(body: ChatRequest) -> str:
    last = body.messages[-1]
    if last.role != "user":
        raise BadRequest(f"the last message must have role 'user', not {last.role!r}")
    if isinstance(last.content, str):
        return last.content
    parts = [p.text for p in last.content or () if p.type == "text" and p.text is not None]
    if not parts:
        raise BadRequest("the last user message has no text content")
    return "\n".join(parts)


def _usage(reply: Reply) -> dict[str, Any]:
    u = reply.usage
    return {
        "prompt_tokens": u.input_total,
        "completion_tokens": u.output,
        "total_tokens": u.input_total + u.output,
        "prompt_tokens_details": {"cached_tokens": u.read},
    }


def _finish(reply: Reply) -> str:
    return "length" if reply.exit == "budget_exhausted" else "stop"


async def chat_completions(request: Request) -> Response:
    user = user_of(request)
    body = await read_body(request, ChatRequest)
    text = newest_user_text(body)
    key = idempotency_key(request)
    gateway = app_state(request).gateway
    sid = request.headers.get(SESSION_HEADER)
    if sid:
        await gateway.authorize(user, sid)
    else:
        wanted = (body.model or "").strip()
        sid = await gateway.create_session(
            user, {"model": wanted} if wanted not in _PLACEHOLDERS else {}
        )
    model = gateway.pool.model_of(sid) or body.model or gateway.defaults.model
    completion_id = "chatcmpl-" + secrets.token_hex(12)
    created = int(time.time())
    if body.stream:

        def start(callbacks: Callbacks) -> Coroutine[Any, Any, Reply]:
            return gateway.send(user, sid, text, idempotency_key=key, callbacks=callbacks)

        events = await turn_events(gateway, start)  # a bad message is a 4xx, not a stream
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        stream = _chunks(events, completion_id, created, model, include_usage)
        return StreamingResponse(
            stream, media_type="text/event-stream", headers={**SSE_HEADERS, SESSION_HEADER: sid}
        )
    reply, timing = await timed(gateway.send(user, sid, text, idempotency_key=key))
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": _finish(reply),
                }
            ],
            "usage": _usage(reply),
        },
        headers={**timing, SESSION_HEADER: reply.new_session_id or sid},
    )


async def _chunks(
    events: AsyncIterator[Event],
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    def chunk(
        delta: dict[str, Any], finish: str | None = None, session: str | None = None
    ) -> bytes:
        frame: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if session:  # /new, /reset, /clear: the conversation continues in this session
            frame["x_stoker_session"] = session
        return encode(None, frame)

    yield chunk({"role": "assistant", "content": ""})
    sent_text = False
    async for event, data in events:
        if event == "text":
            sent_text = True
            yield chunk({"content": data["delta"]})
        elif event == "error":
            yield encode(None, data)
        elif event == "done":
            reply = Reply.from_dict(data)
            if not sent_text and reply.text:  # commands and replayed retries stream no deltas
                yield chunk({"content": reply.text})
            yield chunk({}, _finish(reply), session=reply.new_session_id)
            if include_usage:
                yield encode(
                    None,
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": _usage(reply),
                    },
                )
    yield encode(None, "[DONE]")


async def models(request: Request) -> Response:
    user_of(request)
    model = app_state(request).gateway.defaults.model
    return JSONResponse(
        {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "stoker"}]}
    )
