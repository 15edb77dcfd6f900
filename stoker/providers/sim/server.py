"""The simulator over HTTP: Anthropic Messages, OpenAI Chat Completions and Responses.

Any HTTP client (the official SDKs, other agent frameworks, Stoker's own adapters) can
run offline against it and get real cache accounting: every request goes through
`SimEngine.handle`, the same call the in-process `SimProvider` makes, with the caller's
workspace (a hash of its API key) and the server's clock. It rejects what the real APIs
reject, in their error shapes: no key (401), bad JSON, more than 4 breakpoints or an
unanswered tool_use (400), an unknown model (404).

    POST /v1/messages               Anthropic Messages (`stream: true` for SSE)
    POST /v1/messages/count_tokens  Anthropic token counting
    POST /v1/chat/completions       OpenAI Chat Completions (streams end with a usage chunk
                                    when `stream_options.include_usage` is set)
    POST /v1/responses              OpenAI Responses (streaming events included)
    GET  /stats                     cache totals per key (workspace) and model; with a key,
                                    `you` names the caller's own workspace
    POST /sim/fail                  fail the next requests: {"status": 529, "count": 3,
                                    "retry_after": 0}
    POST /sim/reset                 forget cache entries, totals and pending failures
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from stoker.cache.accounting import AnthropicAccountant
from stoker.cache.models import model_info
from stoker.clock import Clock, SystemClock
from stoker.errors import ConfigError, InvalidRequest, StokerError, WireError
from stoker.providers.sim._background import ServedSim, serve_in_background
from stoker.providers.sim._http import Failure, Ledger, Shape, api_key, error_response, workspace_of
from stoker.providers.sim.engine import SimEngine
from stoker.wire.dialects import anthropic, anthropic_stream, openai_chat_stream
from stoker.wire.dialects import openai_responses_stream as responses_stream

__all__ = ["ServedSim", "SimServer", "create_app", "serve", "serve_in_background"]

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
            result = self.engine.handle(dialect, payload, at=self.clock.now(), workspace=workspace)
        except _Rejected as rejected:
            return rejected.response
        except InvalidRequest as exc:
            return error_response(shape, exc.status or 400, str(exc))
        except WireError as exc:
            return error_response(shape, 400, str(exc))
        except ConfigError as exc:  # a scripted model out of steps: the server's fault
            return error_response(shape, 500, str(exc))
        self.ledger.record(workspace, str(payload["model"]), result.usage)
        if payload.get("stream") is not True:
            if failure is not None:  # a mid-stream failure fails a plain request plainly
                return error_response(shape, failure.status, failure.message)
            return JSONResponse(result.body)
        frames = (
            _frames(dialect, payload, result.body)
            if failure is None
            else _broken(dialect, payload, result.body, failure)
        )
        return StreamingResponse(_aiter(frames), media_type="text/event-stream")

    async def count_tokens(self, request: Request) -> Response:
        """Anthropic's token count: the prompt's total, without touching any cache."""
        try:
            self._caller(request, "anthropic")
            payload = await self._payload(request, "anthropic")
            anthropic.parse_request({"max_tokens": 0, **payload})
            model = str(payload["model"])
            try:
                model_info(model)
            except ConfigError as exc:
                return error_response("anthropic", 404, str(exc))
            counter = AnthropicAccountant(self.engine.anthropic.settings)
            outcome = counter.account(payload, at=0.0, workspace="count_tokens")
        except _Rejected as rejected:
            return rejected.response
        except StokerError as exc:
            return error_response("anthropic", getattr(exc, "status", None) or 400, str(exc))
        return JSONResponse({"input_tokens": outcome.usage.input_total})

    async def fail(self, request: Request) -> Response:
        try:
            failure = Failure.from_json(json.loads(await request.body()))
        except (ValueError, ConfigError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        self.ledger.pending.append(failure)
        return JSONResponse({"queued": failure.count, "status": failure.status})

    async def reset(self, request: Request) -> Response:
        self.engine.anthropic.reset()
        self.engine.openai.reset()
        self.ledger.pending.clear()
        self.ledger.totals.clear()
        self.received.clear()
        return JSONResponse({"reset": True})

    async def stats(self, request: Request) -> Response:
        """Totals per workspace; a caller that sends its key also learns which one is its own."""
        key = api_key(request)
        mine = {"you": workspace_of(key)} if key is not None else {}
        return JSONResponse({**mine, **self.ledger.stats()})


_STREAMS: dict[str, Any] = {
    "anthropic": anthropic_stream,
    "openai_chat": openai_chat_stream,
    "openai_responses": responses_stream,
}


def _events(dialect: str, payload: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    if dialect == "openai_chat":
        usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        return list(openai_chat_stream.chunks(body, include_usage=usage))
    return list(_STREAMS[dialect].events(body))


def _frames(dialect: str, payload: dict[str, Any], body: dict[str, Any]) -> Iterator[bytes]:
    if dialect == "openai_chat":
        usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        return openai_chat_stream.frames(body, include_usage=usage)
    return _STREAMS[dialect].frames(body)  # type: ignore[no-any-return]


def _broken(
    dialect: str, payload: dict[str, Any], body: dict[str, Any], failure: Failure
) -> Iterator[bytes]:
    """The stream of `body` cut before its first text (or just after it) by an error event."""
    module = _STREAMS[dialect]
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
            Route("/stats", sim.stats, methods=["GET"]),
            Route("/sim/fail", sim.fail, methods=["POST"]),
            Route("/sim/reset", sim.reset, methods=["POST"]),
        ]
    )
    app.state.sim = sim
    return app


def serve(engine: SimEngine | None = None, *, host: str, port: int) -> None:
    """Serve the simulator in the foreground until interrupted (`stoker sim serve`)."""
    import uvicorn

    uvicorn.run(create_app(engine), host=host, port=port, ws="none", lifespan="off")
