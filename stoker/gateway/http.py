"""Request plumbing shared by the endpoints: who is asking, bounded JSON bodies, errors.

Bodies are read with a byte cap (a `Content-Length` over the limit is refused before
reading; a chunked body is cut off as soon as it passes it), then validated by a
pydantic model, so every bad input ends as a 4xx with a JSON body saying what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from stoker.errors import StokerError
from stoker.gateway.auth import TokenTable
from stoker.gateway.errors import BadRequest, PayloadTooLarge, as_gateway_error
from stoker.gateway.service import Gateway

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppState:
    gateway: Gateway
    tokens: TokenTable
    max_body_bytes: int


def app_state(request: Request) -> AppState:
    return request.app.state.stoker  # type: ignore[no-any-return]


def user_of(request: Request) -> str:
    return app_state(request).tokens.user_for(request.headers.get("authorization"))


async def read_body(request: Request, model: type[M]) -> M:
    limit = app_state(request).max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body has {declared} bytes; the limit is {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise BadRequest(f"invalid request body: {problems}") from None


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if not key or len(key) > 200 or not key.isprintable():
        raise BadRequest("Idempotency-Key must be 1-200 printable characters")
    return key


def wants_stream(request: Request) -> bool:
    return request.query_params.get("stream", "").lower() in ("1", "true", "yes") or (
        "text/event-stream" in request.headers.get("accept", "")
    )


# -- error handlers ---------------------------------------------------------------------------


async def on_stoker_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StokerError)
    error = as_gateway_error(exc)
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    return JSONResponse(
        {"error": {"type": kind, "message": str(exc.detail)}}, status_code=exc.status_code
    )


async def on_unexpected(request: Request, exc: Exception) -> Response:
    # The server logs the exception (Starlette re-raises it after this response).
    return JSONResponse({"error": {"type": "internal", "message": "internal error"}}, 500)
