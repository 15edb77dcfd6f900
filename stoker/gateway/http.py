"""Request plumbing shared by the endpoints: who is asking, bounded JSON bodies, query
values, content negotiation, errors.

Bodies are read with a byte cap (a `Content-Length` over the limit is refused before
reading; a chunked body is cut off as soon as it passes it), must be sent as JSON, and
are parsed and validated in one step by pydantic's JSON parser, which refuses what the
standard library would let through to fail later: nesting deeper than 200 levels (the
standard parser raises RecursionError), bytes that are not UTF-8, and lone surrogate
escapes ("\\ud800", which no UTF-8 store can hold). So every bad input ends as a 4xx
with a JSON body saying what to fix, before anything is stored.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from stoker.errors import StokerError
from stoker.gateway.auth import TokenTable
from stoker.gateway.errors import (
    BadRequest,
    GatewayError,
    PayloadTooLarge,
    Unavailable,
    UnsupportedMediaType,
    as_gateway_error,
    shown,
)
from stoker.gateway.openai_errors import error_type, is_openai_path
from stoker.gateway.service import Gateway
from stoker.http_server import HttpMiddleware

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppState:
    gateway: Gateway
    tokens: TokenTable
    max_body_bytes: int


def app_state(request: Request) -> AppState:
    return request.app.state.stoker  # type: ignore[no-any-return]


def user_of(request: Request) -> str:
    return app_state(request).tokens.user_for(request.headers.get("authorization"))


# -- bodies -----------------------------------------------------------------------------------


async def read_body(request: Request, model: type[M]) -> M:
    """The body as `model`: an empty body is `{}`; anything else must be JSON."""
    limit = app_state(request).max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        raise PayloadTooLarge(f"the request body has {declared} bytes; the limit is {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if raw.strip():
        _require_json(request.headers.get("content-type"))
    else:
        raw = b"{}"  # a command needs no body, whatever type an empty one was sent as
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors[0]["type"] == "json_invalid":
            raise BadRequest(_not_json(str(errors[0]["msg"]))) from None
        raise BadRequest(f"invalid request body: {_problems(errors)}") from None


def _problems(errors: list[ErrorDetails]) -> str:
    """pydantic's errors as "field.path: what is wrong" (the first few; names cut short,
    since an unknown field's name is the client's and may be any length)."""
    shown_errors = [
        f"{'.'.join(str(x)[:40] for x in e['loc']) or 'body'}: {e['msg']}" for e in errors[:5]
    ]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(shown_errors) + more


# What the parser's message means for a client, where it does not say it plainly
# (pydantic-core's parser: its depth limit, its lone-surrogate and UTF-8 checks).
_JSON_HINTS = [
    (("recursion limit",), "nested too deeply: at most 200 levels below the top"),
    (
        ("surrogate", "hex escape"),
        "text must be Unicode that UTF-8 can hold: a \\ud800-\\udfff escape is only "
        "valid as half of a pair",
    ),
    (("unicode code point",), "the body must be UTF-8, without a byte order mark"),
    (("number out of range",), "a number has more than 4,300 digits"),
]


def _not_json(message: str) -> str:
    message = message.removeprefix("Invalid JSON: ")
    hint = next((h for keys, h in _JSON_HINTS if any(k in message for k in keys)), None)
    return f"the body is not JSON: {message}" + (f" ({hint})" if hint else "")


_CHARSET = re.compile(r"""^\s*charset\s*=\s*"?utf-8"?\s*$""", re.IGNORECASE)


def _require_json(content_type: str | None) -> None:
    """A body sent as anything but JSON in UTF-8 is refused, not guessed at; no
    Content-Type at all is read as JSON (raw HTTP clients often send none)."""
    if content_type is None:
        return
    media, *params = content_type.split(";")
    media = media.strip().lower()
    is_json = media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
    charset_ok = all(_CHARSET.match(p) for p in params if "charset" in p.lower())
    if not (is_json and charset_ok):
        raise UnsupportedMediaType(
            f"the body must be JSON in UTF-8, sent with Content-Type: application/json "
            f"(not {shown(content_type, 80)})"
        )


# -- headers and query values -------------------------------------------------------------------


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if not key or len(key) > 200 or not key.isprintable():
        raise BadRequest("Idempotency-Key must be 1-200 printable characters")
    return key


def query_int(request: Request, name: str, *, default: int, low: int, high: int) -> int:
    """An integer query value in [low, high]; ASCII digits only ("²" is a digit to
    `str.isdigit` but not to `int`), and never a 5,000-digit number parsed."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(high))) or not (
        low <= int(raw) <= high
    ):
        raise BadRequest(f"{name} must be a whole number from {low} to {high}, not {shown(raw)}")
    return int(raw)


_FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def query_flag(request: Request, name: str) -> bool | None:
    """A yes/no query value (None when absent); anything else is a 400, not a silent no."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    flag = _FLAGS.get(raw.lower())
    if flag is None:
        raise BadRequest(f"{name} must be true or false (or 1/0, yes/no), not {shown(raw)}")
    return flag


_QUALITY = re.compile(r"^(0(\.[0-9]{0,3})?|1(\.0{0,3})?)$")


def media_qualities(accept: str) -> dict[str, float]:
    """Each media range of an `Accept` header with its q (1 unless given). A range with
    a malformed q is left out, as if not sent; the first of repeated ranges counts."""
    ranges: dict[str, float] = {}
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        q: float | None = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                value = value.strip()
                q = float(value) if _QUALITY.match(value) else None
        if q is not None and "/" in media:
            ranges.setdefault(media.lower(), q)
    return ranges


def wants_stream(request: Request) -> bool:
    """`?stream=` decides when given; otherwise `Accept` must name text/event-stream
    with q > 0, at least as high as JSON's (q=0 means "not this")."""
    flag = query_flag(request, "stream")
    if flag is not None:
        return flag
    ranges = media_qualities(request.headers.get("accept", ""))
    sse = ranges.get("text/event-stream", 0.0)
    json_q = next(
        (ranges[m] for m in ("application/json", "application/*", "*/*") if m in ranges), 0.0
    )
    return sse > 0 and sse >= json_q


# -- errors -------------------------------------------------------------------------------------


async def on_stoker_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StokerError)
    error = as_gateway_error(exc)
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    if isinstance(error, Unavailable):
        headers = {"Retry-After": str(error.retry_after)}
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    error: dict[str, Any] = {"type": kind, "message": str(exc.detail)}
    if is_openai_path(request.url.path):  # OpenAI's shape there, the gateway's type as code
        error = {**error, "type": error_type(exc.status_code), "param": None, "code": kind}
    return JSONResponse(
        {"error": error},
        status_code=exc.status_code,
        headers=exc.headers,  # a 405's Allow
    )


class InternalErrors(HttpMiddleware):
    """Turns an exception no handler took into a JSON 500 on a connection that stays open.

    Starlette's own last resort sends the same 500 and then re-raises, and uvicorn,
    seeing an exception after a response, closes the connection without saying so
    (no `Connection: close`): a keep-alive client's next request then fails. Here the
    exception is logged and ends with the response. A stream that fails after it has
    started cannot be answered again, so that one is re-raised: closing the connection
    is the only way left to tell the client the stream is incomplete. A client that
    hung up mid-body is not an error here: `stoker.http_server` logs it in one line.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except ClientDisconnect:
            raise
        except Exception:
            log.exception("unexpected error in %s %s", scope["method"], scope["path"])
            if started:
                raise
            response = JSONResponse(GatewayError("internal error").body(), status_code=500)
            await response(scope, receive, send)
