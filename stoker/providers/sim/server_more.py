"""The simulator's routes for Bedrock, OpenRouter, DeepSeek, vLLM and llama.cpp: each
provider's own wire under a prefix of its own, so the official or standard SDK of each
can be pointed at `stoker sim serve`.

    POST /model/{modelId}/converse          Bedrock Converse (botocore / aiobotocore with
    POST /model/{modelId}/converse-stream   endpoint_url = the server; the event stream is
                                            binary, application/vnd.amazon.eventstream)
    POST /openrouter/api/v1/chat/completions  OpenRouter (OpenAI SDK, base_url
                                            .../openrouter/api/v1; `x-session-id` read)
    POST /deepseek/chat/completions         DeepSeek (base_url .../deepseek, or .../v1)
    POST /deepseek/v1/chat/completions
    POST /vllm/v1/chat/completions          vLLM with automatic prefix caching
    POST /llamacpp/v1/chat/completions      llama.cpp's llama-server (slots)

Bedrock's requests are signed (SigV4): the simulator reads the access key id from the
`Credential=` of the `Authorization` header as the caller's account (its cache is per
account) and accepts any signature; a Bedrock API key (`Authorization: Bearer`) works
too. Errors are Bedrock's: the status, `x-amzn-ErrorType` and `{"message": ...}`, which
the SDK raises as a `ClientError` with that code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from stoker.clock import Clock
from stoker.errors import StokerError
from stoker.providers.sim._http import Ledger, SimJSON, request_id, workspace_of
from stoker.providers.sim.engine import SimEngine
from stoker.wire.dialects import bedrock_stream

log = logging.getLogger(__name__)

_CODES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_CHAT_ROUTES = {
    "/openrouter/api/v1/chat/completions": "openrouter_chat",
    "/deepseek/chat/completions": "deepseek_chat",
    "/deepseek/v1/chat/completions": "deepseek_chat",
    "/vllm/v1/chat/completions": "vllm_chat",
    "/llamacpp/v1/chat/completions": "llamacpp_chat",
}


class SimServer(Protocol):
    """What these routes use of `stoker.providers.sim.server.SimServer`."""

    engine: SimEngine
    clock: Clock
    ledger: Ledger

    @property
    def received(self) -> Any: ...

    async def answer(self, request: Request, dialect: str) -> Response: ...


def aws_error(status: int, message: str, code: str | None = None) -> Response:
    """An error as Bedrock sends it (botocore reads the code from `x-amzn-ErrorType`)."""
    code = code or _CODES.get(status, "InternalServerException")
    rid = request_id()
    headers = {"x-amzn-ErrorType": code, "x-amzn-RequestId": rid}
    return SimJSON({"message": message}, status_code=status, headers=headers)


def account_of(request: Request) -> str | None:
    """The caller's account: the access key id a SigV4 signature names, or a bearer key."""
    scheme, _, rest = request.headers.get("authorization", "").partition(" ")
    if scheme == "AWS4-HMAC-SHA256":
        for part in rest.split(","):
            name, _, value = part.strip().partition("=")
            if name == "Credential" and value:
                return value.split("/", 1)[0]
        return None
    if scheme.lower() == "bearer" and rest.strip():
        return rest.strip()
    return None


async def converse(sim: SimServer, request: Request, *, stream: bool) -> Response:
    """A Converse (or ConverseStream) call: auth, injected failures, the engine."""
    key = account_of(request)
    if key is None:
        return aws_error(403, "Missing Authentication Token", "MissingAuthenticationTokenException")
    workspace = workspace_of(key)
    if not sim.ledger.accepts(workspace):
        return aws_error(
            403,
            "The security token included in the request is invalid.",
            "UnrecognizedClientException",
        )
    failure = sim.ledger.next_failure()
    if failure is not None and failure.during_stream is None:
        return aws_error(failure.status, failure.message)
    try:
        payload = json.loads(await request.body())
    except ValueError as exc:
        return aws_error(400, f"the body is not valid JSON: {exc}", "SerializationException")
    except ClientDisconnect:
        raise
    if not isinstance(payload, dict):
        return aws_error(400, "the body must be a JSON object", "SerializationException")
    payload["modelId"] = str(request.path_params["model_id"])
    sim.received.append((workspace, payload))
    try:
        result = sim.engine.handle(
            "bedrock_converse", payload, at=sim.clock.now(), workspace=workspace
        )
    except StokerError as exc:
        status = getattr(exc, "status", None) or 400
        return aws_error(404 if status == 404 else status if status >= 500 else 400, str(exc))
    except Exception:  # a bug: still an answer in Bedrock's shape, and a log line
        log.exception("the simulator failed on a Bedrock request")
        return aws_error(500, "the simulator failed on this request (a bug)")
    sim.ledger.record(workspace, payload["modelId"], result.usage)
    headers = {"x-amzn-RequestId": request_id()}
    if not stream:
        if failure is not None:
            return aws_error(failure.status, failure.message)
        return SimJSON(result.body, headers=headers)
    frames: Iterable[bytes] = bedrock_stream.frames(result.body)
    if failure is not None:
        events = list(bedrock_stream.frames(result.body))
        cut = 1 if failure.during_stream == "before_text" else 2
        frames = [*events[:cut], bedrock_stream.exception(failure.status, failure.message)]
    return StreamingResponse(
        _aiter(frames), media_type="application/vnd.amazon.eventstream", headers=headers
    )


async def _aiter(frames: Iterable[bytes]) -> AsyncIterator[bytes]:
    for f in frames:
        yield f


def routes(sim: SimServer) -> list[Route]:
    """The routes of these providers on `sim`."""

    async def plain(request: Request) -> Response:
        return await converse(sim, request, stream=False)

    async def streamed(request: Request) -> Response:
        return await converse(sim, request, stream=True)

    def chat(dialect: str) -> Any:
        async def answer(request: Request) -> Response:
            return await sim.answer(request, dialect)

        return answer

    out = [
        Route("/model/{model_id:path}/converse", plain, methods=["POST"]),
        Route("/model/{model_id:path}/converse-stream", streamed, methods=["POST"]),
    ]
    out += [Route(path, chat(dialect), methods=["POST"]) for path, dialect in _CHAT_ROUTES.items()]
    return out
