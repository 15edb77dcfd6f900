"""Errors of the OpenAI-compatible endpoints, in OpenAI's own shape.

An OpenAI client reads `{"error": {"message", "type", "param", "code"}}` and picks its
exception class from the status; a framework then looks at `type` and `code` (a
context-length or a bad-key handler, a retry on `server_error`). So these endpoints
answer every failure that way: OpenAI's type name for the status, the gateway's own
error type kept as `code` (`not_found`, `tools_removed`, ...) unless a more specific
OpenAI code applies, and `param` naming the field when one is at fault. The gateway's
other endpoints keep their own shape (`errors.py`).

Every response of these endpoints, an error or not, streamed or not, carries an
`x-request-id` (`req_` and 24 hex digits, new for each request), which the SDK shows as
`_request_id` and on its exceptions: a client that reports a failure can quote it, and
the gateway's log line for that request (an unexpected error, a stream that failed)
names the same id.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stoker.errors import StokerError
from stoker.gateway.errors import GatewayError, as_gateway_error, shown

log = logging.getLogger(__name__)

OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/responses", "/v1/models"})
REQUEST_ID_HEADER = "x-request-id"


def is_openai_path(path: str) -> bool:
    """Whether `path` is one of the OpenAI-compatible endpoints (a model's included)."""
    return path in OPENAI_PATHS or path.startswith("/v1/models/")


# OpenAI's error type per status, as its API names them.
_TYPES = {403: "permission_error"}
# Where OpenAI has a code of its own for what the gateway calls by another name.
_CODES = {"unauthorized": "invalid_api_key", "payload_too_large": "request_too_large"}


class ModelNotFound(GatewayError, status=404, type="not_found"):
    """OpenAI's code `model_not_found`: `/v1/models/{model}` of a model this gateway does
    not serve."""

    def __init__(self, model: str, served: str) -> None:
        super().__init__(
            f"The model {shown(model, 64)} does not exist here: this gateway serves "
            f"{served!r} (GET /v1/models lists it)"
        )
        self.param = "model"
        self.code = "model_not_found"


def error_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    return _TYPES.get(status, "invalid_request_error")


def error_object(error: GatewayError) -> dict[str, Any]:
    """The `error` object of OpenAI's error body for `error`."""
    body = error.body()["error"]
    extra = {k: v for k, v in body.items() if k not in ("type", "message")}
    return {
        "message": str(error),
        "type": error_type(error.status),
        "param": getattr(error, "param", None),
        "code": getattr(error, "code", None) or _CODES.get(error.type, error.type),
        **extra,  # e.g. the names of removed tools
    }


def error_response(error: GatewayError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse({"error": error_object(error)}, status_code=error.status, headers=headers)


def from_stream_error(body: dict[str, Any], status: int = 500) -> dict[str, Any]:
    """A gateway error body (as a turn's stream reports it) as OpenAI's error object."""
    inner = body.get("error") or {}
    kind = str(inner.get("type") or "internal")
    status = {"provider_error": 502, "provider_timeout": 504}.get(kind, status)
    return {
        "message": str(inner.get("message") or "internal error"),
        "type": error_type(status),
        "param": None,
        "code": _CODES.get(kind, kind),
    }


Endpoint = Callable[[Request], Awaitable[Response]]


def openai_errors(endpoint: Endpoint) -> Endpoint:
    """`endpoint` with every failure answered in OpenAI's shape, a surprise as a 500
    `server_error` (logged, its text never sent: it may hold anything)."""

    @functools.wraps(endpoint)
    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except StokerError as exc:
            return error_response(as_gateway_error(exc))
        except ClientDisconnect:  # the client hung up mid-body: `stoker.http_server` logs it
            raise
        except Exception:
            log.exception(
                "unexpected error in %s %s (request %s)",
                request.method,
                request.url.path,
                request_id(request),
            )
            return error_response(GatewayError("internal error"))

    return wrapped


# -- request ids --------------------------------------------------------------------------------


def request_id(request: Request) -> str | None:
    """The id `RequestIds` gave this request (None outside the OpenAI endpoints)."""
    return getattr(request.state, "request_id", None)


class RequestIds:
    """ASGI middleware: a new id for each request to an OpenAI-compatible endpoint, in
    its `x-request-id` response header (the 404s and 405s the router answers included)
    and in `request.state.request_id` for the endpoint's log lines."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_openai_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        rid = "req_" + secrets.token_hex(12)
        # A copy: the server's state dict for the request is not this middleware's to change.
        scope = {**scope, "state": {**scope.get("state", {}), "request_id": rid}}

        async def with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
            await send(message)

        await self.app(scope, receive, with_id)
