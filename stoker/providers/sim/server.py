"""The simulator over HTTP: Anthropic Messages, OpenAI Chat Completions and Responses.

Any HTTP client (the official SDKs, other agent frameworks, Stoker's own adapters) can
run offline against it and get real cache accounting: every request goes through
`SimEngine.handle`, the same call the in-process `SimProvider` makes, with the caller's
workspace (a hash of its API key) and the server's clock. It rejects what the real APIs
reject, in their error shapes and with their request-id headers: no key (401), bad JSON,
more than 4 breakpoints, an unanswered tool_use, a missing `max_tokens` and every other
refusal of `stoker.providers.sim.api_*` (400), an unknown model (404). Nothing a client
sends makes it answer a 5xx other than the failures it is told to inject.

    POST /v1/messages               Anthropic Messages (`stream: true` for SSE)
    POST /v1/messages/count_tokens  Anthropic token counting
    POST /v1/chat/completions       OpenAI Chat Completions (streams end with a usage chunk
                                    when `stream_options.include_usage` is set)
    POST /v1/responses              OpenAI Responses (streaming events included; stored
                                    responses chain by `previous_response_id`)
    GET|DELETE /v1/responses/{id}   a stored response; `/input_items` lists what it answered
    POST /v1/responses/input_tokens OpenAI's token count of a Responses request
    GET  /v1/models[/{id}]          the models served, in Anthropic's shape when the request
                                    carries `anthropic-version` (as Anthropic's SDK sends),
                                    else OpenAI's
    POST /model/{id}/converse[-stream]  Bedrock, and OpenRouter, DeepSeek, vLLM and
                                    llama.cpp under /openrouter, /deepseek, /vllm and
                                    /llamacpp (`stoker.providers.sim.server_more`)
    POST /v1beta/models/{m}:generateContent   the Gemini API (`server_gemini.py`: streaming,
                                    countTokens, models, explicit cachedContents), under
                                    /v1 too, with a literal or percent-encoded colon
    GET  /stats                     cache totals per key (workspace) and model; with a key,
                                    `you` names the caller's own workspace
    POST /sim/fail                  fail the next requests: {"status": 529, "count": 3,
                                    "retry_after": 0}
    POST /sim/reset                 forget cache entries, totals and pending failures
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import MissingExtra

try:
    from starlette.applications import Starlette
except ImportError as exc:  # the server stack is an extra: the in-process simulator needs none
    raise MissingExtra("server", "the simulator's HTTP server", "starlette") from exc
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from stoker.clock import Clock, SystemClock
from stoker.errors import ConfigError, StokerError
from stoker.providers.sim import catalogue, server_more
from stoker.providers.sim._background import ServedSim, serve_in_background
from stoker.providers.sim._http import (
    Failure,
    Ledger,
    Shape,
    SimJSON,
    api_key,
    error_response,
    id_headers,
    workspace_of,
)
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.families import chat_like
from stoker.providers.sim.server_gemini import GeminiRoutes
from stoker.wire.dialects import anthropic_stream, openai_chat_stream
from stoker.wire.dialects import openai_responses_stream as responses_stream

__all__ = ["ServedSim", "SimServer", "create_app", "serve", "serve_in_background"]

log = logging.getLogger(__name__)

_NO_KEY = {
    "anthropic": "x-api-key header is required",
    "openai": "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
}
_BAD_KEY = {"anthropic": "invalid x-api-key", "openai": "Incorrect API key provided."}


class _Rejected(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


@dataclass(slots=True, kw_only=True)
class SimServer:
    """The state behind the app: one engine, one clock, the ledger of callers.

    `received` keeps the latest payloads as (workspace, payload), so a test can check
    what a client actually sent.
    """

    engine: SimEngine = field(default_factory=SimEngine)
    clock: Clock = field(default_factory=SystemClock)
    ledger: Ledger = field(default_factory=Ledger)
    received: deque[tuple[str, dict[str, Any]]] = field(default_factory=lambda: deque(maxlen=256))

    def sent_by(self, key: str) -> list[dict[str, Any]]:
        """The payloads received from `key`, oldest first (the latest 256 of all callers)."""
        workspace = workspace_of(key)
        return [payload for ws, payload in self.received if ws == workspace]

    def _caller(self, request: Request, shape: Shape) -> str:
        key = api_key(request)
        if key is None:
            raise _Rejected(error_response(shape, 401, _NO_KEY[shape]))
        workspace = workspace_of(key)
        if not self.ledger.accepts(workspace):
            raise _Rejected(error_response(shape, 401, _BAD_KEY[shape]))
        return workspace

    async def _payload(self, request: Request, shape: Shape) -> dict[str, Any]:
        try:
            payload = json.loads(await request.body())
        except ValueError as exc:
            raise _Rejected(
                error_response(shape, 400, f"the body is not valid JSON: {exc}")
            ) from exc
        except RecursionError as exc:  # nested deeper than the parser can follow
            raise _Rejected(
                error_response(shape, 400, "the body is nested too deeply to read")
            ) from exc
        if not isinstance(payload, dict):
            raise _Rejected(error_response(shape, 400, "the body must be a JSON object"))
        return payload

    async def answer(self, request: Request, dialect: str) -> Response:
        """One model call: auth, injected failures, the engine, then JSON or SSE."""
        shape: Shape = "anthropic" if dialect == "anthropic" else "openai"
        try:
            workspace = self._caller(request, shape)
            failure = self.ledger.next_failure()
            if failure is not None and failure.during_stream is None:
                return error_response(
                    shape, failure.status, failure.message, headers=failure.headers()
                )
            payload = await self._payload(request, shape)
            self.received.append((workspace, payload))
            result = self.engine.handle(
                dialect,
                payload,
                at=self.clock.now(),
                workspace=workspace,
                headers=request.headers,
            )
        except ClientDisconnect:  # nobody to answer: `stoker.http_server` logs one line
            raise
        except Exception as exc:
            return _failed(shape, exc, f"on a {dialect} request")
        self.ledger.record(workspace, str(payload["model"]), result.usage)
        headers = id_headers(shape)
        if payload.get("stream") is not True:
            if failure is not None:  # a mid-stream failure fails a plain request plainly
                return error_response(shape, failure.status, failure.message)
            return SimJSON(result.body, headers=headers)
        frames = (
            _frames(dialect, payload, result.body)
            if failure is None
            else _broken(dialect, payload, result.body, failure)
        )
        return StreamingResponse(_aiter(frames), media_type="text/event-stream", headers=headers)

    async def count_tokens(self, request: Request) -> Response:
        """Anthropic's token count: the prompt's total, without touching any cache."""
        return await self._count(request, "anthropic")

    async def input_tokens(self, request: Request) -> Response:
        """OpenAI's token count of a Responses request (its chain included), cache untouched."""
        return await self._count(request, "openai_responses")

    async def _count(self, request: Request, dialect: str) -> Response:
        shape: Shape = "anthropic" if dialect == "anthropic" else "openai"
        try:
            workspace = self._caller(request, shape)
            payload = await self._payload(request, shape)
            total = self.engine.count(dialect, payload, workspace=workspace)
        except ClientDisconnect:  # nobody to answer: `stoker.http_server` logs one line
            raise
        except Exception as exc:
            return _failed(shape, exc, "to count tokens")
        body: dict[str, Any] = {"input_tokens": total}
        if shape == "openai":
            body = {"object": "response.input_tokens", **body}
        return SimJSON(body, headers=id_headers(shape))

    async def stored_response(self, request: Request) -> Response:
        """GET (or DELETE) a stored response, or list the input items it answered."""
        try:
            workspace = self._caller(request, "openai")
        except _Rejected as rejected:
            return rejected.response
        response_id = str(request.path_params["response_id"])
        stored = self.engine.responses.get(workspace, response_id)
        if stored is None:
            message = f"Response with id '{response_id}' not found."
            return error_response("openai", 404, message, param="response_id", code=None)
        headers = id_headers("openai")
        if request.method == "DELETE":
            self.engine.responses.delete(workspace, response_id)
            body = {"id": response_id, "object": "response", "deleted": True}
            return SimJSON(body, headers=headers)
        if request.url.path.endswith("/input_items"):
            return SimJSON(catalogue.input_items(stored, response_id), headers=headers)
        return SimJSON(stored.body, headers=headers)

    async def models(self, request: Request) -> Response:
        """The models served; one of them by id. Anthropic's shape when the caller sends
        `anthropic-version` (Anthropic's SDK always does), OpenAI's otherwise."""
        shape: Shape = "anthropic" if "anthropic-version" in request.headers else "openai"
        try:
            self._caller(request, shape)
        except _Rejected as rejected:
            return rejected.response
        wanted = request.path_params.get("model_id")
        if wanted is None:
            return SimJSON(catalogue.model_list(shape), headers=id_headers(shape))
        entry = catalogue.model_entry(shape, str(wanted))
        if entry is None:
            message = (
                f"model: {wanted}"
                if shape == "anthropic"
                else f"The model '{wanted}' does not exist or you do not have access to it."
            )
            return error_response(shape, 404, message, param="model", code="model_not_found")
        return SimJSON(entry, headers=id_headers(shape))

    async def fail(self, request: Request) -> Response:
        try:
            failure = Failure.from_json(json.loads(await request.body()))
        except (ValueError, ConfigError) as exc:
            return SimJSON({"error": str(exc)}, status_code=400)
        self.ledger.pending.append(failure)
        return SimJSON({"queued": failure.count, "status": failure.status})

    async def reset(self, request: Request) -> Response:
        self.engine.anthropic.reset()
        self.engine.openai.reset()
        self.engine.google.reset()
        self.engine.families.reset()
        self.engine.responses.clear()
        self.ledger.pending.clear()
        self.ledger.totals.clear()
        self.received.clear()
        return SimJSON({"reset": True})

    async def stats(self, request: Request) -> Response:
        """Totals per workspace; a caller that sends its key also learns which one is its own."""
        key = api_key(request)
        mine = {"you": workspace_of(key)} if key is not None else {}
        return SimJSON({**mine, **self.ledger.stats()})


def _failed(shape: Shape, exc: Exception, doing: str) -> Response:
    """The answer to a request that raised `exc`: a rejection as built, a refusal as the
    provider words it, and a bug still in the API's shape (and a log line). Call it in
    the `except` block, where the log line finds the traceback."""
    if isinstance(exc, _Rejected):
        return exc.response
    if isinstance(exc, StokerError):
        return _refused(shape, exc)
    log.exception("the simulator failed %s", doing)
    return error_response(shape, 500, "the simulator failed on this request (a bug)")


def _refused(shape: Shape, exc: StokerError) -> Response:
    """A refused request as the provider answers it: its status (400 unless the error
    says otherwise; 404 for an unknown model), message, and the parameter at fault."""
    if isinstance(exc, ConfigError):  # a scripted model out of steps: the server's fault
        return error_response(shape, 500, str(exc))
    status = getattr(exc, "status", None) or 400
    return error_response(
        shape,
        status,
        str(exc),
        param=getattr(exc, "param", None),
        code=getattr(exc, "code", None),
    )


_STREAMS: dict[str, Any] = {
    "anthropic": anthropic_stream,
    "openai_chat": openai_chat_stream,
    "openai_responses": responses_stream,
}


def _events(dialect: str, payload: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    if chat_like(dialect):
        usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        return list(openai_chat_stream.chunks(body, include_usage=usage))
    return list(_STREAMS[dialect].events(body))


def _frames(dialect: str, payload: dict[str, Any], body: dict[str, Any]) -> Iterator[bytes]:
    if chat_like(dialect):
        usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        return openai_chat_stream.frames(body, include_usage=usage)
    return _STREAMS[dialect].frames(body)  # type: ignore[no-any-return]


def _broken(
    dialect: str, payload: dict[str, Any], body: dict[str, Any], failure: Failure
) -> Iterator[bytes]:
    """The stream of `body` cut before its first text (or just after it) by an error event."""
    module = _STREAMS.get(dialect, openai_chat_stream)
    events = _events(dialect, payload, body)
    reader = module.Accumulator()
    first_text = next((i for i, e in enumerate(events) if reader.feed(e)), len(events) - 1)
    cut = 1 if failure.during_stream == "before_text" else first_text + 1
    for event in events[:cut]:
        yield module.encode(event)
    yield module.encode(module.error_event(failure.status, failure.message))


async def _aiter(frames: Iterable[bytes]) -> AsyncIterator[bytes]:
    for f in frames:
        yield f


def create_app(
    engine: SimEngine | None = None,
    *,
    clock: Clock | None = None,
    api_keys: Iterable[str] | None = None,
) -> Starlette:
    """The ASGI app. `api_keys` limits which keys are accepted (any key when None);
    only their hashes are kept. The state is `app.state.sim` (a `SimServer`)."""
    sim = SimServer(
        engine=engine or SimEngine(),
        clock=clock or SystemClock(),
        ledger=Ledger.accepting(api_keys),
    )

    async def messages(request: Request) -> Response:
        return await sim.answer(request, "anthropic")

    async def chat(request: Request) -> Response:
        return await sim.answer(request, "openai_chat")

    async def responses(request: Request) -> Response:
        return await sim.answer(request, "openai_responses")

    app = Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", sim.count_tokens, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/responses/input_tokens", sim.input_tokens, methods=["POST"]),
            Route("/v1/responses/{response_id}", sim.stored_response, methods=["GET", "DELETE"]),
            Route("/v1/responses/{response_id}/input_items", sim.stored_response, methods=["GET"]),
            Route("/stats", sim.stats, methods=["GET"]),
            Route("/sim/fail", sim.fail, methods=["POST"]),
            Route("/sim/reset", sim.reset, methods=["POST"]),
            *server_more.routes(sim),  # Bedrock, OpenRouter, DeepSeek, vLLM, llama.cpp
            # the Gemini API (server_gemini.py), and GET /v1/models[/{id}] for OpenAI's and
            # Anthropic's callers, which share its paths
            *GeminiRoutes(sim).routes(v1_models=sim.models),
        ]
    )
    app.state.sim = sim
    return app


def serve(
    engine: SimEngine | None = None,
    *,
    host: str,
    port: int,
    started: Callable[[str], None] | None = None,
) -> None:
    """Serve the simulator in the foreground until interrupted (`stoker sim serve`). The
    port is taken first (`PortInUse` when another process has it); `started` gets the
    base URL once it answers."""
    from stoker.http_server import base_url, listen
    from stoker.http_server import serve as http_serve  # uvicorn loads only here

    sockets = listen(host, port, owner="stoker sim serve", port_flag="--port", host_flag="--host")
    url = base_url(host, sockets[0].getsockname()[1])
    http_serve(
        create_app(engine),
        sockets,
        started=(lambda: started(url)) if started is not None else None,
        ws="none",
        lifespan="off",
    )
