"""What the HTTP simulator keeps besides the engine: callers, injected failures, totals.

Errors go out in each provider's own JSON shape, so an SDK raises the same exception
class against the simulator as against the real API. A caller is known only by a hash
of its API key (its workspace); the key itself is never stored.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse

from stoker.errors import ConfigError
from stoker.wire.blocks import valid_text
from stoker.wire.dialects.anthropic_stream import ERROR_TYPES
from stoker.wire.usage import Usage

Shape = Literal["anthropic", "openai"]

# OpenAI's (type, code) per status, as its API sends them.
_OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
    504: ("server_error", None),
}
_ids = itertools.count()


def workspace_of(key: str) -> str:
    """The workspace a key belongs to: a hash, so the key is never kept."""
    return "ws_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def api_key(request: Request) -> str | None:
    """The caller's key from `x-api-key` (Anthropic) or `Authorization: Bearer` (OpenAI)."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class SimJSON(JSONResponse):
    """A JSON answer that can always be written: a client's lone surrogate echoed back
    (an error naming its value, a Response echoing its metadata) becomes U+FFFD, and a
    number JSON cannot hold (a huge exponent parses to infinity) becomes null."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except (ValueError, UnicodeEncodeError):
            return super().render(_writable(content))


def _writable(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {_writable(str(k)): _writable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_writable(v) for v in value]
    return value


def request_id() -> str:
    """A request id in the providers' format (`req_` and 24 hex digits), unique per process."""
    return "req_" + hashlib.sha256(f"sim-request-{next(_ids)}".encode()).hexdigest()[:24]


def id_headers(shape: Shape, rid: str | None = None) -> dict[str, str]:
    """The header that carries the request id, under the provider's name for it (the SDKs
    expose it as `_request_id`)."""
    return {"request-id" if shape == "anthropic" else "x-request-id": rid or request_id()}


def error_response(
    shape: Shape,
    status: int,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """An error in the provider's own shape (what its SDK parses into an exception)."""
    rid = request_id()
    body: dict[str, Any]
    if shape == "anthropic":
        kind = ERROR_TYPES.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": rid}
    else:
        kind, usual = _OPENAI_ERRORS.get(status, ("server_error", None))
        body = {"error": {"message": message, "type": kind, "param": param, "code": code or usual}}
    return SimJSON(body, status_code=status, headers={**id_headers(shape, rid), **(headers or {})})


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A failure the simulator was told to answer with: `count` times `status`.

    With `during_stream`, a streamed answer starts and then fails with the provider's
    mid-stream error event, before its first text or right after it.
    """

    status: int
    count: int = 1
    retry_after: float | None = None
    retry_after_ms: float | None = None
    message: str = "failure injected by the simulator"
    during_stream: Literal["before_text", "after_text"] | None = None

    @classmethod
    def from_json(cls, data: Any) -> Failure:
        if not isinstance(data, dict) or not isinstance(data.get("status"), int):
            raise ConfigError('expected {"status": 529, "count": 3, "retry_after": 0}')
        status, count = data["status"], data.get("count", 1)
        if not 400 <= status <= 599 or not isinstance(count, int) or count < 0:
            raise ConfigError("status must be an HTTP error status and count a count")
        during = data.get("during_stream")
        if during not in (None, "before_text", "after_text"):
            raise ConfigError('during_stream must be "before_text" or "after_text"')
        return cls(
            status=status,
            count=count,
            retry_after=data.get("retry_after"),
            retry_after_ms=data.get("retry_after_ms"),
            message=str(
                data.get("message") or f"failure injected by the simulator (HTTP {status})"
            ),
            during_stream=during,
        )

    def headers(self) -> dict[str, str]:
        out = {}
        if self.retry_after is not None:
            out["retry-after"] = f"{self.retry_after:g}"
        if self.retry_after_ms is not None:
            out["retry-after-ms"] = f"{self.retry_after_ms:g}"
        return out


@dataclass(slots=True)
class _Totals:
    requests: int = 0
    usage: Usage = field(default_factory=Usage)

    def add(self, usage: Usage) -> None:
        self.requests += 1
        self.usage = self.usage + usage

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            **self.usage.to_dict(),
            "hit_ratio": round(self.usage.hit_ratio, 4),
        }


@dataclass(slots=True)
class Ledger:
    """Per-workspace, per-model cache totals and the queue of injected failures."""

    keys: frozenset[str] | None = None  # hashes of accepted keys; None accepts any key
    pending: list[Failure] = field(default_factory=list)
    totals: dict[str, dict[str, _Totals]] = field(default_factory=dict)

    @classmethod
    def accepting(cls, keys: Iterable[str] | None) -> Ledger:
        return cls(keys=None if keys is None else frozenset(workspace_of(k) for k in keys))

    def accepts(self, workspace: str) -> bool:
        return self.keys is None or workspace in self.keys

    def next_failure(self) -> Failure | None:
        """The injected failure this request gets, if any (each is used `count` times)."""
        while self.pending and self.pending[0].count <= 0:
            self.pending.pop(0)
        if not self.pending:
            return None
        head = self.pending[0]
        self.pending[0] = replace(head, count=head.count - 1)
        return head

    def record(self, workspace: str, model: str, usage: Usage) -> None:
        self.totals.setdefault(workspace, {}).setdefault(model, _Totals()).add(usage)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for workspace, models in sorted(self.totals.items()):
            total = _Totals()
            for t in models.values():
                total.requests += t.requests
                total.usage = total.usage + t.usage
            out[workspace] = {
                **total.to_dict(),
                "models": {m: t.to_dict() for m, t in sorted(models.items())},
            }
        return {"keys": out}
