"""The ASGI app: routes over `Gateway`, nothing else.

Each endpoint authenticates, reads a bounded body, calls one gateway method and renders
its value. The OpenAI-compatible endpoint, the dashboard and the OpenAPI document live
in their own modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from stoker.agent.output import OutputSpec
from stoker.agent.seams import Callbacks
from stoker.config import DEFAULT_LIMITS
from stoker.errors import ConfigError, StokerError
from stoker.gateway.approvals import Show, decision_view
from stoker.gateway.auth import TokenTable
from stoker.gateway.companion import Companion
from stoker.gateway.dashboard import page as dashboard_page
from stoker.gateway.errors import InvalidParam
from stoker.gateway.events import session_events
from stoker.gateway.http import (
    AppState,
    InternalErrors,
    app_state,
    idempotency_key,
    on_http_error,
    on_stoker_error,
    query_int,
    read_body,
    user_of,
    wants_stream,
)
from stoker.gateway.images import image_blocks
from stoker.gateway.openai_compat import chat_completions, model, models
from stoker.gateway.openai_errors import RequestIds
from stoker.gateway.openai_responses import responses
from stoker.gateway.openapi import openapi_document
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import parse_reasoning
from stoker.gateway.sse import HEADERS as SSE_HEADERS
from stoker.gateway.sse import encode, turn_events
from stoker.gateway.timing import timed
from stoker.gateway.tracing import TraceContext
from stoker.gateway.views import Reply, history_view, summary_view, totals_view, usage_view
from stoker.tools import Approver


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSession(_Strict):
    model: str | None = Field(default=None, max_length=200)
    reasoning: str | None = Field(default=None, max_length=32)


class ImageIn(_Strict):
    media_type: str = Field(max_length=100)
    data: str  # base64 of the image's bytes, checked by `images.image_blocks`


class SendMessage(_Strict):
    text: str
    images: list[ImageIn] = Field(default_factory=list)  # after the text, in order
    # The answer as JSON of this schema (validated; the reply's text is that JSON).
    output: dict[str, Any] | None = None

    def output_spec(self) -> OutputSpec[Any] | None:
        if self.output is None:
            return None
        try:
            return OutputSpec.from_schema(self.output)
        except ConfigError as exc:
            raise InvalidParam(str(exc), param="output") from exc


class RunCommand(_Strict):
    argument: str = Field(default="", max_length=1000)


class AnswerApproval(_Strict):
    decision: Literal["approve", "deny"]
    reason: str | None = Field(default=None, max_length=1000)


async def create_session(request: Request) -> Response:
    user = user_of(request)
    body = await read_body(request, CreateSession)
    overrides = {"model": body.model} if body.model else {}
    if body.reasoning:
        overrides.update(parse_reasoning(body.reasoning))
    gateway = app_state(request).gateway
    sid = await gateway.create_session(user, overrides)
    model = gateway.defaults.with_overrides(overrides).model
    return JSONResponse({"id": sid, "model": model}, status_code=201)


async def list_sessions(request: Request) -> Response:
    user = user_of(request)
    limit = query_int(request, "limit", default=50, low=1, high=500)
    rows = await app_state(request).gateway.list_sessions(user, limit=limit)
    return JSONResponse({"sessions": [summary_view(r) for r in rows]})


async def get_session(request: Request) -> Response:
    gateway, sid = app_state(request).gateway, request.path_params["sid"]
    view = await gateway.view(user_of(request), sid)
    return JSONResponse(history_view(view, gateway.planned_keep_warm(sid)))


async def get_usage(request: Request) -> Response:
    gateway, sid = app_state(request).gateway, request.path_params["sid"]
    view = await gateway.view(user_of(request), sid)
    return JSONResponse(usage_view(view, gateway.planned_keep_warm(sid)))


async def get_totals(request: Request) -> Response:
    """The caller's most recent sessions together (`limit` of them): the dashboard's totals."""
    user = user_of(request)
    limit = query_int(request, "limit", default=100, low=1, high=500)
    gateway = app_state(request).gateway
    rows = await gateway.list_sessions(user, limit=limit)
    return JSONResponse(totals_view([await gateway.view(user, r.id) for r in rows]))


async def delete_session(request: Request) -> Response:
    await app_state(request).gateway.delete(user_of(request), request.path_params["sid"])
    return Response(status_code=204)


async def send_message(request: Request) -> Response:
    user, sid = user_of(request), request.path_params["sid"]
    body = await read_body(request, SendMessage)
    key = idempotency_key(request)
    gateway = app_state(request).gateway
    blocks = image_blocks([(i.media_type, i.data) for i in body.images])
    output = body.output_spec()
    if wants_stream(request):

        def start(callbacks: Callbacks) -> Coroutine[Any, Any, Reply]:
            return gateway.send(
                user,
                sid,
                body.text,
                blocks=blocks,
                idempotency_key=key,
                callbacks=callbacks,
                output=output,
            )

        def approver(show: Show) -> Approver:
            return gateway.approvals.approver(user, sid, show)

        # a bad message is a 4xx, not a stream
        events = await turn_events(gateway, start, approver=approver)

        async def frames() -> AsyncIterator[bytes]:
            async for event, data in events:
                yield encode(event, data)

        return StreamingResponse(frames(), media_type="text/event-stream", headers=SSE_HEADERS)
    reply, timing = await timed(
        gateway.send(user, sid, body.text, blocks=blocks, idempotency_key=key, output=output)
    )
    return _reply(reply, timing)


async def answer_approval(request: Request) -> Response:
    """Approve or deny a risky call the session's streamed turn waits on."""
    user, sid = user_of(request), request.path_params["sid"]
    body = await read_body(request, AnswerApproval)
    approval_id = request.path_params["approval_id"]
    decision = await app_state(request).gateway.answer_approval(
        user, sid, approval_id, approve=body.decision == "approve", reason=body.reason or ""
    )
    return JSONResponse(decision_view(approval_id, decision))


async def post_command(request: Request) -> Response:
    user, sid = user_of(request), request.path_params["sid"]
    body = await read_body(request, RunCommand)
    reply = await app_state(request).gateway.command(
        user,
        sid,
        request.path_params["name"],
        body.argument,
        idempotency_key=idempotency_key(request),
    )
    return _reply(reply, {})


def _reply(reply: Reply, headers: dict[str, str]) -> Response:
    if reply.replayed:
        headers = {**headers, "Idempotent-Replayed": "true"}
    return JSONResponse(reply.to_dict(), headers=headers)


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def health(request: Request) -> Response:
    """The process is up (for an orchestrator's liveness probe): never touches the store."""
    return JSONResponse({"status": "ok", "cached_agents": len(app_state(request).gateway.agents)})


async def ready(request: Request) -> Response:
    """Whether to send this replica traffic (a load balancer's readiness probe): the store
    answers, its schema is current, and the replica is not draining. 503 otherwise."""
    gateway = app_state(request).gateway
    await gateway.ready()
    return JSONResponse({"status": "ready", "replica": gateway.replica})


def _by_method(path: str, **endpoints: Callable[[Request], Awaitable[Response]]) -> Route:
    """One route for every method of `path`. Starlette answers a method no route takes
    from the first route whose path matches, so with a route per method a 405's `Allow`
    would name only that route's methods."""

    async def endpoint(request: Request) -> Response:
        return await endpoints["GET" if request.method == "HEAD" else request.method](request)

    return Route(path, endpoint, methods=list(endpoints))


def create_app(
    gateway: Gateway,
    *,
    tokens: TokenTable,
    max_body_bytes: int = DEFAULT_LIMITS.max_body_bytes,
    close_store: bool = False,
    grace: float | None = None,
    companions: Sequence[Companion] = (),
) -> Starlette:
    """The gateway's ASGI app. `close_store`: close the store when the app shuts down;
    `grace`: how long streamed turns still running then may take (None: no bound);
    `companions`: started with the app and stopped before it, their routes served (the
    chat platforms' bridges, see `companion`)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        started: list[Companion] = []
        try:
            for companion in companions:
                await companion.start()
                started.append(companion)
            yield
        finally:
            for companion in reversed(started):
                await companion.stop(grace=grace)
            await gateway.close(grace=grace)
            if close_store:
                await gateway.store.close()

    sid = "/v1/sessions/{sid}"
    routes = [
        _by_method("/v1/sessions", POST=create_session, GET=list_sessions),
        _by_method(sid, GET=get_session, DELETE=delete_session),
        Route(sid + "/usage", get_usage, methods=["GET"]),
        Route("/v1/usage", get_totals, methods=["GET"]),
        Route(sid + "/events", session_events, methods=["GET"]),
        Route(sid + "/messages", send_message, methods=["POST"]),
        Route(sid + "/commands/{name}", post_command, methods=["POST"]),
        Route(sid + "/approvals/{approval_id}", answer_approval, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
        Route("/ui", dashboard_page, methods=["GET"]),
        *(route for companion in companions for route in companion.routes()),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={StokerError: on_stoker_error, HTTPException: on_http_error},
        middleware=[
            Middleware(TraceContext, telemetry=gateway.telemetry),
            Middleware(RequestIds),
            Middleware(InternalErrors),
        ],
    )
    app.state.stoker = AppState(gateway=gateway, tokens=tokens, max_body_bytes=max_body_bytes)
    return app
