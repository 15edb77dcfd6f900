"""Gateway errors: each knows its HTTP status and a stable `type` for the JSON body.

    StokerError
    └── GatewayError             500 internal; each subclass: a status and a type, sent
        │                        as {"error": {"type", "message"}}
        ├── BadRequest           400 invalid_request: the body or command cannot be used
        │   └── InvalidParam     400 invalid_request: names the field at fault and a code
        ├── Unauthorized         401 unauthorized: no bearer token, or an unknown one
        ├── NotFound             404 not_found: no such session *for this user*
        ├── ApprovalNotFound     404 not_found: no such approval waits here for the session
        ├── Conflict             409 conflict: the stored session cannot be continued as is
        │   └── ToolsRemoved     409 tools_removed: the configuration dropped tools it used
        ├── PayloadTooLarge      413 payload_too_large: body or message over the limit
        ├── UnsupportedMediaType 415 unsupported_media_type: a body sent as another type
        ├── UpstreamError        502 provider_error: the provider failed or answered nonsense
        │                            (an answer that never validated as the output asked for)
        ├── Unavailable          503 store_unavailable: the database cannot be reached now
        │                        (or the gateway is shutting down), with Retry-After
        └── UpstreamTimeout      504 provider_timeout: the provider did not answer in time

Another user's session is a `NotFound`, worded exactly like a missing one, so a
response never tells whether an id exists. A provider failure is the provider's fault,
never the gateway's: a malformed answer (HTML, an empty body, the wrong JSON, a stream
of garbage) is a 502 like a 5xx, not a 500 `internal`.
"""

from __future__ import annotations

from typing import Any

from stoker.errors import (
    ConcurrentWrite,
    ConfigError,
    OutputError,
    PrefixError,
    ProviderError,
    ProviderTimeout,
    SessionNotFound,
    StokerError,
    StoreUnavailable,
    ToolError,
)


def shown(value: str, limit: int = 40) -> str:
    """`value` quoted for an error message and cut short: what a client sent may be
    megabytes long, and an error message need not carry it all back."""
    return repr(value[:limit]) + ("..." if len(value) > limit else "")


class GatewayError(StokerError):
    """Root of the gateway's errors. A subclass names its status and type as class
    keywords, `class X(GatewayError, status=404, type="not_found")`: an error's HTTP face
    reads in its first line, and a bare one needs no body but its docstring."""

    status = 500
    type = "internal"

    def __init_subclass__(cls, *, status: int | None = None, type: str | None = None) -> None:
        super().__init_subclass__()
        if status is not None:
            cls.status = status
        if type is not None:
            cls.type = type

    def body(self) -> dict[str, Any]:
        return {"error": {"type": self.type, "message": str(self)}}


class BadRequest(GatewayError, status=400, type="invalid_request"):
    """The body or command cannot be used."""


class InvalidParam(BadRequest):
    """A 400 that names the request field at fault and a specific code (OpenAI's
    `param` and `code`, e.g. `tools` and `client_tools_unsupported`)."""

    def __init__(self, message: str, *, param: str, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        body = super().body()
        body["error"].update(param=self.param, code=self.code)
        return body


class Unauthorized(GatewayError, status=401, type="unauthorized"):
    """No bearer token, or one no user holds."""


class NotFound(GatewayError, status=404, type="not_found"):
    """No such session *for this user*: another's is worded the same, so an id never
    shows whether it exists."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {shown(session_id, 64)}")
        self.session_id = session_id


class ApprovalNotFound(GatewayError, status=404, type="not_found"):
    """No approval with this id waits for this user's session in this process (it was
    never asked, belongs to someone else, or waits on another replica)."""

    def __init__(self, session_id: str, approval_id: str) -> None:
        super().__init__(
            f"no approval {shown(approval_id, 64)} is waiting in session "
            f"{shown(session_id, 64)} on this gateway replica; an approval waits in the "
            "replica that streams its message: send the answer there"
        )
        self.session_id = session_id
        self.approval_id = approval_id


class PayloadTooLarge(GatewayError, status=413, type="payload_too_large"):
    """A body or a message over the limit the gateway is configured with."""


class UnsupportedMediaType(GatewayError, status=415, type="unsupported_media_type"):
    """A body sent as another media type than the endpoint reads."""


class Conflict(GatewayError, status=409, type="conflict"):
    """The stored session cannot be continued as it is."""


class UpstreamError(GatewayError, status=502, type="provider_error"):
    """The provider failed or answered what was not asked for: its fault, not ours."""


class Unavailable(GatewayError, status=503, type="store_unavailable"):
    """Retry later: the database is unreachable (a restart, a failover) or this replica
    is draining. Nothing the client was told is stored was lost; a retry with the same
    Idempotency-Key settles a message whose outcome the outage hid."""

    def __init__(self, message: str, *, retry_after: int = StoreUnavailable.retry_after) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamTimeout(GatewayError, status=504, type="provider_timeout"):
    """The provider did not answer in time; the client may retry."""


def as_gateway_error(exc: StokerError) -> GatewayError:
    """The HTTP face of a library error (a message written for users, kept as is)."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, StoreUnavailable):
        return Unavailable(str(exc), retry_after=exc.retry_after)
    if isinstance(exc, SessionNotFound):
        return NotFound(exc.session_id)
    if isinstance(exc, ConfigError | ToolError):
        return BadRequest(str(exc))
    if isinstance(exc, PrefixError | ConcurrentWrite):
        return Conflict(str(exc))
    if isinstance(exc, ProviderTimeout):
        return UpstreamTimeout(str(exc))
    if isinstance(exc, ProviderError | OutputError):  # the model did not give what was asked
        return UpstreamError(str(exc))
    return GatewayError(str(exc))


class ToolsRemoved(Conflict, type="tools_removed"):
    """The configuration no longer offers tools this session's history used. Answered
    once per change, and nothing is sent; the next message continues without them
    (`stoker.gateway.toolsets`)."""

    def __init__(self, session_id: str, names: list[str]) -> None:
        it, is_ = ("it", "is") if len(names) == 1 else ("them", "are")
        super().__init__(
            f"this conversation used {', '.join(names)}, which the gateway's configuration "
            "no longer offers; your message was not sent. Send /new to start a new "
            "conversation with the tools there are now, or ask the operator to restore "
            "the toolset. Sending a message again continues this conversation without "
            f"{it} (the model is told {it} {is_} unavailable when it calls {it})."
        )
        self.session_id = session_id
        self.names = names

    def body(self) -> dict[str, Any]:
        body = super().body()
        body["error"]["tools"] = list(self.names)
        return body
