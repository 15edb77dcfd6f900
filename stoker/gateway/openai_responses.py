"""`POST /v1/responses`: the OpenAI Responses API over a gateway session.

The same contract as the Chat Completions endpoint (`openai_compat.py`), in the
Responses shapes: `input` is a string or a list of message items (a client's own
`instructions` are left out like its system messages, the prefix being the server's),
the answer is one `message` output item, usage says `input_tokens_details.cached_tokens`
and `cache_write_tokens` (plus `x_stoker`), and a stream is the Responses event sequence
(`response.created` ... `response.completed`, every event numbered). A request continues
a session by its header, by `previous_response_id` (the id of an answer the gateway gave
in that conversation; `input` then holds only what is new), or by its resent history.
Client tools (`tools`, `function_call` / `function_call_output` items) are refused with
a 400 that says so. `max_output_tokens` cuts the answer the client receives, not the
agent's model calls (`openai_limits.py`): a cut answer is an `incomplete` Response with
`incomplete_details.reason` "max_output_tokens", like one the agent's own budget ended.
Every event of a stream is one the openai SDK's `ResponseStreamEvent` types parse; a
failed Response's `error.code` is "server_error" (the codes that field may hold are
OpenAI's), and the `error` event before it has the gateway's own code.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from stoker.gateway.errors import InvalidParam
from stoker.gateway.http import read_body, user_of
from stoker.gateway.openai_compat import (
    CLIENT_TOOLS,
    Content,
    extension,
    image_urls,
    structured_output,
    text_of,
)
from stoker.gateway.openai_errors import from_stream_error, openai_errors, request_id
from stoker.gateway.openai_history import SESSION_HEADER, Conversation, Said, continued_in, exchange
from stoker.gateway.openai_limits import Cut, Cutter, Limits, token_limit
from stoker.gateway.sse import HEADERS as SSE_HEADERS
from stoker.gateway.sse import Event, encode
from stoker.gateway.views import Reply
from stoker.wire.dialects import openai_responses as dialect

log = logging.getLogger(__name__)

_TOOL_ITEMS = frozenset({"function_call", "function_call_output", "custom_tool_call"})


class InputItem(BaseModel):
    """A message item, typed (`"type": "message"`) or not; other item types are told
    apart from it and refused by name."""

    model_config = ConfigDict(extra="allow")  # id, status & co.
    type: str = "message"
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: Content | None = None


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, store & co. are accepted and ignored
    model: str | None = Field(default=None, max_length=200)
    input: str | list[InputItem]
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, min_length=1, max_length=200)
    stream: bool = False
    tools: list[Any] | None = None
    text: dict[str, Any] | None = None  # its `format` asks for structured output
    max_output_tokens: Any = None  # checked by `limits`, which names the field at fault

    def limits(self) -> Limits:
        return Limits(max_tokens=token_limit(self.max_output_tokens, "max_output_tokens"))


def conversation(body: ResponsesRequest) -> Conversation:
    """The request's user and assistant messages; client tools are refused here."""
    if body.tools:
        raise InvalidParam(
            CLIENT_TOOLS.format(what="`tools`"), param="tools", code="client_tools_unsupported"
        )
    if isinstance(body.input, str):
        return Conversation(messages=(Said(role="user", text=body.input),))
    said = []
    for i, item in enumerate(body.input):
        if item.type in _TOOL_ITEMS:
            raise InvalidParam(
                CLIENT_TOOLS.format(what=f"{item.type} items in `input`"),
                param=f"input[{i}]",
                code="client_tools_unsupported",
            )
        if item.type != "message":
            raise InvalidParam(
                f"input items of type {item.type[:40]!r} are not supported here; send "
                "message items (a role and its content)",
                param=f"input[{i}].type",
            )
        if item.role is None:
            raise InvalidParam("a message item needs its role", param=f"input[{i}].role")
        if item.role == "user" or item.role == "assistant":
            said.append(
                Said(role=item.role, text=text_of(item.content), images=image_urls(item.content))
            )
    return Conversation(messages=tuple(said))


class _Answer:
    """The Response object of one answer, pending and final, and its stream events."""

    def __init__(self, *, response_id: str, model: str, max_output_tokens: int | None) -> None:
        self.id = response_id
        self.message_id = "msg_" + secrets.token_hex(16)
        self.created = int(time.time())
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.sequence = 0

    def body(
        self, reply: Reply | None, cut: Cut | None = None, *, status: str = "completed"
    ) -> dict[str, Any]:
        """The Response: in progress (no reply yet), or with the reply, its text as the
        client gets it (`cut`), and its usage."""
        truncated = reply is not None and (
            reply.exit == "budget_exhausted" or (cut is not None and cut.reason == "length")
        )
        usage = None
        if reply is not None:
            usage = {
                **dialect.usage_fields(reply.usage),
                "x_stoker": extension(reply.usage, reply.cost_usd),
            }
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "model": self.model,
            "status": "incomplete" if truncated else status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
            "instructions": None,
            "metadata": {},
            "output": [self.item(cut, truncated=truncated)] if cut is not None else [],
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
            "temperature": None,
            "top_p": None,
            "max_output_tokens": self.max_output_tokens,
            "usage": usage,
        }

    def part(self, text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def item(self, cut: Cut | None, *, truncated: bool = False) -> dict[str, Any]:
        """The answer's message item: in progress (no text yet), or its text as sent."""
        status = "in_progress" if cut is None else "incomplete" if truncated else "completed"
        content = [] if cut is None else [self.part(cut.text)]
        return {
            "id": self.message_id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content,
        }

    def event(self, kind: str, **fields: Any) -> bytes:
        frame = {"type": kind, **fields, "sequence_number": self.sequence}
        self.sequence += 1
        return encode(kind, frame)

    def opening(self) -> Iterator[bytes]:
        pending = self.body(None, status="in_progress")
        yield self.event("response.created", response=pending)
        yield self.event("response.in_progress", response=pending)
        yield self.event("response.output_item.added", output_index=0, item=self.item(None))
        yield self.event("response.content_part.added", **self._at(), part=self.part(""))

    def delta(self, text: str) -> bytes:
        return self.event("response.output_text.delta", **self._at(), delta=text, logprobs=[])

    def closing(self, reply: Reply, cut: Cut) -> Iterator[bytes]:
        """The closing events; `cut` is the answer as streamed."""
        final = self.body(reply, cut)
        [item] = final["output"]
        yield self.event("response.output_text.done", **self._at(), text=cut.text, logprobs=[])
        yield self.event("response.content_part.done", **self._at(), part=self.part(cut.text))
        yield self.event("response.output_item.done", output_index=0, item=item)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield self.event(kind, response=final)

    def failing(self, error: dict[str, Any]) -> Iterator[bytes]:
        yield self.event("error", code=error["code"], message=error["message"], param=None)
        # `error.code` of a Response is one of OpenAI's codes; the gateway's is above.
        failed = {
            **self.body(None, status="failed"),
            "error": {"code": "server_error", "message": error["message"], "type": error["type"]},
        }
        yield self.event("response.failed", response=failed)

    def _at(self) -> dict[str, Any]:
        return {"item_id": self.message_id, "output_index": 0, "content_index": 0}


@openai_errors
async def responses(request: Request) -> Response:
    user_of(request)  # a 401 before anything about the body
    body = await read_body(request, ResponsesRequest)
    response_id = "resp_" + secrets.token_hex(16)
    turn = await exchange(
        request,
        conversation(body),
        param="input",
        model=body.model,
        previous_response_id=body.previous_response_id,
        response_id=response_id,
        limits=body.limits(),
        output=structured_output((body.text or {}).get("format"), "text.format", nested=False),
    )
    limits = turn.limits
    answer = _Answer(response_id=response_id, model=turn.model, max_output_tokens=limits.max_tokens)
    if body.stream:
        stream = _stream(answer, await turn.events(), limits.cutter(), request_id(request))
        headers = {**SSE_HEADERS, SESSION_HEADER: turn.session_id}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    reply, timing = await turn.answer()
    headers = {**timing, SESSION_HEADER: continued_in(reply)}
    return JSONResponse(answer.body(reply, limits.cut(reply.text)), headers=headers)


async def _stream(
    answer: _Answer, events: AsyncIterator[Event], cutter: Cutter, request: str | None
) -> AsyncIterator[bytes]:
    for frame in answer.opening():
        yield frame
    async for event, data in events:
        if event == "text":
            if text := cutter.feed(data["delta"]):
                yield answer.delta(text)
        elif event == "error":
            error = from_stream_error(data)
            log.info("request %s: the streamed answer failed (%s)", request, error["code"])
            for frame in answer.failing(error):
                yield frame
        elif event == "done":
            reply = Reply.from_dict(data)
            # The rest of the answer: all of it for a command or a replayed retry,
            # which stream no deltas.
            rest = cutter.finish(reply.text)
            if rest.text:
                yield answer.delta(rest.text)
            for frame in answer.closing(reply, Cut(text=cutter.sent_text, reason=rest.reason)):
                yield frame
