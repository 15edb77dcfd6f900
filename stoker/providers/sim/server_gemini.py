"""The simulator over HTTP in the Gemini API's wire, so `google-genai` runs against
`stoker sim serve` unchanged (`http_options={"base_url": "http://127.0.0.1:8765"}`).

    POST   /v1beta/models/{model}:generateContent        an answer (`SimEngine.handle`)
    POST   /v1beta/models/{model}:streamGenerateContent  the same as SSE (`?alt=sse`)
    POST   /v1beta/models/{model}:countTokens            `{"totalTokens": N}`, no cache touched
    GET    /v1beta/models[/{model}]                      the Gemini models served
    POST   /v1beta/cachedContents                        create an explicit cache
    GET    /v1beta/cachedContents                        list them (`pageSize`, `pageToken`)
    GET    /v1beta/cachedContents/{id}                   one of them
    PATCH  /v1beta/cachedContents/{id}                   a new `ttl` or `expireTime`
    DELETE /v1beta/cachedContents/{id}                   delete it

Every route is served under `/v1` too, as the service does: `google-genai` calls `v1`
unless told `api_version="v1beta"`, and it sends the colon before a method
percent-encoded (`gemini-2.5-flash%3AgenerateContent`), which the server decodes before
routing. `GET /v1/models` is also the OpenAI and Anthropic model list: a request with a
Google key (`x-goog-api-key` or `?key=`) gets Gemini's, any other the list it had.

The key comes in `x-goog-api-key` (or `?key=`); the caller's workspace is a hash of it.
Errors are Google's: `{"error": {"code", "message", "status"}}`; no key is a 403, a key
the server does not accept a 400 `API_KEY_INVALID`, as the Gemini API answers them.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from stoker.cache.models import known_models, model_info
from stoker.clock import Clock
from stoker.errors import ConfigError, StokerError
from stoker.providers.sim._http import Ledger, SimJSON, id_headers, workspace_of
from stoker.providers.sim.engine import SimEngine
from stoker.wire.dialects import gemini_stream
from stoker.wire.dialects.gemini import proto_json
from stoker.wire.dialects.gemini_caches import CacheInfo, bare_model, render_cache

# The API versions the service answers; google-genai calls v1 unless told otherwise.
VERSIONS = ("v1beta", "v1")
Endpoint = Callable[[Request], Awaitable[Response]]


class Served(Protocol):
    """What these routes use of the server (`stoker.providers.sim.server.SimServer`)."""

    engine: SimEngine
    clock: Clock
    ledger: Ledger
    received: deque[tuple[str, dict[str, Any]]]


log = logging.getLogger(__name__)

STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
NO_KEY = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)
BAD_KEY = "API key not valid. Please pass a valid API key."


# What reading a body of the wrong shape raises before a check names the field at fault.
_MISSHAPEN = (KeyError, IndexError, TypeError, AttributeError, ValueError, OverflowError)


def _misshapen(exc: Exception) -> Response:
    return error(400, f"Invalid JSON payload received: {exc!r:.300}")


class _Refused(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def error(
    status: int, message: str, *, reason: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    body: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": STATUS.get(status, "UNKNOWN"),
    }
    if reason is not None:
        body["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
            }
        ]
    headers = {**id_headers("openai"), **(headers or {})}
    return SimJSON({"error": body}, status_code=status, headers=headers)


def _refused(exc: StokerError) -> Response:
    if isinstance(exc, ConfigError):  # a scripted model out of steps: the server's fault
        return error(500, str(exc))
    return error(getattr(exc, "status", None) or 400, str(exc))


R = TypeVar("R", bound=Response | None)


async def _answered(act: Callable[[], Awaitable[R]]) -> R | Response:
    """What `act` answers, or the API's error for what refused it: the caller's key, a
    body that is not JSON or not of the right shape, what the accounting rejected."""
    try:
        return await act()
    except _Refused as refused:
        return refused.response
    except StokerError as exc:
        return _refused(exc)
    except _MISSHAPEN as exc:
        return _misshapen(exc)


class GeminiRoutes:
    """The Gemini endpoints of one `SimServer`."""

    def __init__(self, sim: Served) -> None:
        self.sim = sim

    def _caller(self, request: Request) -> str:
        key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
        if not key:
            raise _Refused(error(403, NO_KEY, reason="SERVICE_DISABLED"))
        workspace = workspace_of(key)
        if not self.sim.ledger.accepts(workspace):
            raise _Refused(error(400, BAD_KEY, reason="API_KEY_INVALID"))
        return workspace

    async def _json(self, request: Request) -> dict[str, Any]:
        try:
            payload = json.loads(await request.body() or b"{}")
        except (ValueError, RecursionError) as exc:
            raise _Refused(error(400, f"Invalid JSON payload received. {exc}")) from exc
        if not isinstance(payload, dict):
            raise _Refused(error(400, "Invalid JSON payload received: not an object"))
        return dict(proto_json(payload))

    async def model_call(self, request: Request) -> Response:
        """`models/{model}:{method}`."""
        target = str(request.path_params["target"])
        model, _, method = target.rpartition(":")
        if method == "countTokens":
            return await self._count(request, model)
        if method not in ("generateContent", "streamGenerateContent"):
            return error(404, f"Method {method!r} is not found")
        try:
            workspace = self._caller(request)
            failure = self.sim.ledger.next_failure()
            if failure is not None:
                return error(failure.status, failure.message, headers=failure.headers())
            payload = {**await self._json(request), "model": bare_model(model)}
            self.sim.received.append((workspace, payload))
            result = self.sim.engine.handle(
                "gemini", payload, at=self.sim.clock.now(), workspace=workspace
            )
        except _Refused as refused:
            return refused.response
        except StokerError as exc:
            return _refused(exc)
        except ClientDisconnect:
            raise
        except Exception:  # a bug: still an answer in the API's shape, and a log line
            log.exception("the simulator failed on a Gemini request")
            return error(500, "the simulator failed on this request (a bug)")
        self.sim.ledger.record(workspace, payload["model"], result.usage)
        if method == "generateContent":
            return SimJSON(result.body, headers=id_headers("openai"))
        frames = gemini_stream.frames(result.body)
        return StreamingResponse(_aiter(frames), media_type="text/event-stream")

    async def _count(self, request: Request, model: str) -> Response:
        async def count() -> Response:
            workspace = self._caller(request)
            payload = await self._json(request)
            inner = payload.get("generateContentRequest") or payload
            body = {**inner, "model": bare_model(model)}
            return SimJSON(
                {"totalTokens": self.sim.engine.count("gemini", body, workspace=workspace)}
            )

        return await _answered(count)

    async def models(self, request: Request) -> Response:
        try:
            self._caller(request)
        except _Refused as refused:
            return refused.response
        wanted = request.path_params.get("model")
        names = [n for n in known_models() if model_info(n).provider == "google"]
        if wanted is not None:
            name = bare_model(str(wanted))
            if name not in names:
                return error(404, f"models/{name} is not found for API version {_version(request)}")
            return SimJSON(_model(name))
        return SimJSON({"models": [_model(n) for n in names]})

    async def caches(self, request: Request) -> Response:
        """POST (create) or GET (list) `cachedContents`."""
        google = self.sim.engine.google
        now = self.sim.clock.now()

        async def act() -> Response:
            workspace = self._caller(request)
            if request.method == "POST":
                made = google.create_cache(await self._json(request), at=now, workspace=workspace)
                return SimJSON(render_cache(made))
            return SimJSON(_page(google.list_caches(at=now, workspace=workspace), request))

        return await _answered(act)

    async def cache(self, request: Request) -> Response:
        """GET, PATCH or DELETE one cache."""
        google = self.sim.engine.google
        now = self.sim.clock.now()
        name = f"cachedContents/{request.path_params['cache_id']}"

        async def act() -> Response:
            workspace = self._caller(request)
            if request.method == "DELETE":
                google.delete_cache(name, at=now, workspace=workspace)
                return SimJSON({})
            if request.method == "PATCH":
                body = await self._json(request)
                made = google.update_cache(name, body, at=now, workspace=workspace)
                return SimJSON(render_cache(made, updated_at=now))
            return SimJSON(render_cache(google.get_cache(name, at=now, workspace=workspace)))

        return await _answered(act)

    def routes(self, *, v1_models: Endpoint) -> list[Route]:
        """The routes under both API versions. `v1_models` answers `GET /v1/models[/{id}]`
        for callers without a Google key (the OpenAI and Anthropic model list)."""
        out: list[Route] = []
        for version in VERSIONS:
            other = v1_models if version == "v1" else None
            out += [
                Route(
                    f"/{version}/models/{{target:path}}",
                    self._post_or_get(other),
                    methods=["GET", "POST"],
                ),
                Route(f"/{version}/models", self._list(other), methods=["GET"]),
                Route(f"/{version}/cachedContents", self.caches, methods=["GET", "POST"]),
                Route(
                    f"/{version}/cachedContents/{{cache_id}}",
                    self.cache,
                    methods=["GET", "PATCH", "DELETE"],
                ),
            ]
        return out

    def _list(self, other: Endpoint | None) -> Endpoint:
        async def listed(request: Request) -> Response:
            if other is not None and not _google_caller(request):
                return await other(request)
            return await self.models(request)

        return listed

    def _post_or_get(self, other: Endpoint | None) -> Endpoint:
        async def post_or_get(request: Request) -> Response:
            if request.method == "POST":
                return await self.model_call(request)
            if other is not None and not _google_caller(request):
                request.path_params["model_id"] = request.path_params["target"]
                return await other(request)
            request.path_params["model"] = request.path_params["target"]
            return await self.models(request)

        return post_or_get


def _google_caller(request: Request) -> bool:
    """Whether a request shared with OpenAI's and Anthropic's paths is Gemini's: it
    carries a Google API key, where their SDKs send `Authorization` or `x-api-key`."""
    return "x-goog-api-key" in request.headers or "key" in request.query_params


def _version(request: Request) -> str:
    return request.url.path.split("/")[1] if request.url.path.count("/") > 1 else "v1beta"


def _model(name: str) -> dict[str, Any]:
    info = model_info(name)
    return {
        "name": f"models/{name}",
        "displayName": name,
        "inputTokenLimit": info.context_window or 0,
        "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent"],
    }


def _page(listed: list[CacheInfo], request: Request) -> dict[str, Any]:
    size = _whole(request, "pageSize", 100)
    start = _whole(request, "pageToken", 0)
    page = listed[start : start + size]
    out: dict[str, Any] = {"cachedContents": [render_cache(c) for c in page]}
    if start + size < len(listed):
        out["nextPageToken"] = str(start + size)
    return out


def _whole(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name) or ""
    if not raw:
        return default
    if not raw.isdigit() or len(raw) > 9:
        raise _Refused(error(400, f"Invalid value for {name}: {raw[:40]!r}"))
    return int(raw)


async def _aiter(frames: Iterator[bytes]) -> AsyncIterator[bytes]:
    for f in frames:
        yield f
