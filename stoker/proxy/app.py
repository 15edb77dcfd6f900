"""The proxy's ASGI app: bytes forwarded as they arrive, calls recorded after.

Each request goes upstream with the client's own headers (its key included) and the
response comes back chunk by chunk as the upstream sends it (`aiohttp`'s client, whose
per-request cost on the proxy's loop is half `httpx`'s, streaming into a Starlette
`StreamingResponse`), so a streamed answer starts reaching the client at the moment it
leaves the provider. A copy of the chunks is kept; once the response is over
the recorder reads it, off the path of the bytes.

Audit mode forwards the client's body untouched: the upstream receives, and the client
gets back, exactly the bytes it would without the proxy. Optimize mode parses the body
first and forwards the rewritten one (`stoker.proxy.optimize`).

An upstream that cannot be reached gets the client a 502 in its API's error shape.

Recording happens on this loop (`Recorder`, as tests and benchmarks of cost use it) or,
under `stoker proxy`, in a child process (`RecorderProcess`), so that none of its CPU
sits between a client's answer and its next request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from stoker.errors import MissingExtra

try:
    import aiohttp
    from starlette.applications import Starlette
except ImportError as exc:  # the server stack is an extra: the proxy's report needs none
    raise MissingExtra("server", "stoker proxy", exc.name or "aiohttp") from exc
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from stoker.cache.keys import KeyShards
from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import WarmPlan
from stoker.clock import Clock, SystemClock
from stoker.errors import StokerError
from stoker.providers.sim._http import error_response
from stoker.proxy.keepwarm import ProxyKeepWarm, warm_body
from stoker.proxy.lineage import LineageState
from stoker.proxy.markers import read
from stoker.proxy.optimize import encode, rewrite
from stoker.proxy.recorder import Call, ExchangeSink, Recorder, info_of
from stoker.proxy.routes import (
    client_key,
    dialect_of,
    forwarded_headers,
    returned_headers,
    tenant_of,
    upstream_url,
)

if TYPE_CHECKING:
    from stoker.proxy.recorder_process import RecorderProcess

log = logging.getLogger(__name__)

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    """`upstream`: anthropic, openai or a URL. `optimize`: rewrite requests (else audit).
    `policy`: the breakpoint TTLs and time policy, Stoker's sessions' defaults."""

    upstream: str
    optimize: bool = False
    policy: CachePolicy = field(default_factory=CachePolicy)
    timeout: float = 600.0

    @property
    def mode(self) -> str:
        return "optimize" if self.optimize else "audit"


class Proxy:
    """The state behind the app: the upstream client, the recorder, the keep-warm timer."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        sink: ExchangeSink | None,
        clock: Clock | None = None,
        process: RecorderProcess | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.process = process
        self.recorder = process.local if process is not None else Recorder(sink)
        self.shards = KeyShards()
        self.upstream = upstream_url(config.upstream)
        self._client: aiohttp.ClientSession | None = None  # made on the loop that serves
        self.keep_warm = (
            ProxyKeepWarm(self.clock, config.policy, self._ping) if config.optimize else None
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending = 0
        self._idle = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    # -- a request ----------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        self._loop = asyncio.get_running_loop()
        path = request.url.path
        body = await request.body()
        headers = request.headers.items()
        outgoing = forwarded_headers(headers)
        dialect = dialect_of(path) if request.method == "POST" else None
        call = None
        if dialect is not None:
            self._begin()
            call = Call(
                tenant=tenant_of(client_key(headers)),
                dialect=dialect,
                path=path,
                mode=self.config.mode,
                started_at=self.clock.now(),
            )
            if self.config.optimize:
                body = self._optimized(call, body, outgoing)
            call.body = body
        target = self.upstream + path + (f"?{request.url.query}" if request.url.query else "")
        began = time.perf_counter()
        try:
            upstream = await self.client().request(
                request.method, target, headers=outgoing, data=body
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            message = f"the proxy could not reach the upstream: {_named(exc)}"
            if call is not None:
                call.status, call.error = 502, message
                self._finish(call, began)
            anthropic = path.startswith("/v1/messages")
            return error_response("anthropic" if anthropic else "openai", 502, message)
        if call is not None:
            call.status = upstream.status
            call.streamed = upstream.headers.get("content-type", "").startswith("text/event-stream")
        return StreamingResponse(
            self._relay(upstream, call, began),
            status_code=upstream.status,
            headers=returned_headers(upstream.headers.items()),
        )

    def client(self) -> aiohttp.ClientSession:
        """The upstream client: one session (its connection pool) for the proxy's life."""
        if self._client is None:
            self._client = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.config.timeout, connect=10.0),
                auto_decompress=False,  # the bytes relayed are the bytes recorded
            )
        return self._client

    def _optimized(self, call: Call, body: bytes, outgoing: list[tuple[str, str]]) -> bytes:
        """The rewritten body; the client's own when it is not a request the proxy reads
        (the upstream then answers it as it would without the proxy)."""
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise ValueError("not an object")
            request = self.recorder.parse(call.dialect, payload)
        except (ValueError, RecursionError, StokerError) as exc:
            call.error = f"not rewritten: the body is not a {call.dialect} request ({exc!r:.200})"
            return body
        call.request = request
        admission = self.recorder.admit(call)
        assert admission is not None
        info = info_of(request.prefix.params.model, call.dialect)
        done = rewrite(
            call.dialect,
            payload,
            request,
            admission.lineage,
            info,
            policy=self.config.policy,
            shards=self.shards,
            at=call.started_at,
        )
        call.sent, call.request = done.payload, done.request
        call.rewrites, call.rolling = done.rewrites, done.rolling
        call.auth = outgoing  # what a keep-warm ping of this lineage sends upstream
        return encode(done.payload)

    async def _relay(
        self, upstream: aiohttp.ClientResponse, call: Call | None, began: float
    ) -> AsyncIterator[bytes]:
        chunks: list[bytes] = []
        try:
            async for chunk in upstream.content.iter_any():
                if call is not None:
                    chunks.append(chunk)
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            if call is not None:
                call.error = f"the upstream broke off the response: {_named(exc)}"
        finally:
            upstream.release()
            if call is not None:
                call.response = b"".join(chunks)
                self._finish(call, began)

    # -- after a request ---------------------------------------------------------------------

    def _begin(self) -> None:
        with self._idle:
            self._pending += 1

    def _finish(self, call: Call, began: float) -> None:
        """Record the call in a task of its own: the client has its bytes already."""
        call.duration = time.perf_counter() - began
        task = asyncio.get_running_loop().create_task(self._record(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _record(self, call: Call) -> None:
        try:
            if self.process is not None:
                await self.process.record(call)
            else:
                await self.recorder.record(call)
            admission = call.admission
            if (
                self.keep_warm is not None
                and admission is not None
                and call.status == 200
                and call.purpose == "turn"
            ):
                self.keep_warm.watch(admission.lineage)
        except Exception as exc:  # recording must never touch the client's traffic
            log.warning("could not record a proxied call: %r", exc)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def wait_recorded(self, timeout: float = 10.0) -> bool:
        """Block (another thread) until every call so far is recorded; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    # -- keep-warm ------------------------------------------------------------------------------

    async def _ping(self, lineage: LineageState, plan: WarmPlan) -> None:
        body = warm_body(lineage, plan)
        if body is None:
            return
        self._begin()
        call = Call(
            tenant=lineage.tenant,
            dialect=lineage.dialect,
            path=lineage.path,
            mode="optimize",
            started_at=self.clock.now(),
            sent=body,
            body=encode(body),
            purpose=plan.action,
            request=replace(self.recorder.parse(lineage.dialect, body), breakpoints=read(body)),
            admission=self.recorder.index.admit_ping(lineage),
        )
        began = time.perf_counter()
        try:
            target = self.upstream + lineage.path
            async with self.client().post(target, headers=lineage.auth, data=call.body) as got:
                call.status, call.response = got.status, await got.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            call.status, call.error = 502, f"keep-warm ping failed: {_named(exc)}"
        call.duration = time.perf_counter() - began
        await self._record(call)

    async def start(self) -> None:
        """Start the recorder process now, not at the first call (which it would delay)."""
        if self.process is not None:
            await self.process.start()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.keep_warm is not None:
            await self.keep_warm.aclose()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.process is not None:
            await self.process.aclose()
        if self._client is not None:
            await self._client.close()

    def run_on_loop(self, coroutine: Any, timeout: float = 60.0) -> Any:
        """Run `coroutine` on the loop serving the app, from another thread (a benchmark
        crossing an idle gap with the proxy's keep-warm); its result."""
        if self._loop is None:
            raise RuntimeError("the proxy has served no request yet")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def close_from_thread(self, timeout: float = 10.0) -> None:
        """`aclose` on the loop serving the app, called from another thread (a server
        run in the background, as tests and the bench do, before it stops)."""
        if self._loop is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self.aclose(), self._loop).result(timeout)


def create_app(
    config: ProxyConfig,
    *,
    sink: ExchangeSink | None,
    clock: Clock | None = None,
    process: RecorderProcess | None = None,
) -> Starlette:
    """The ASGI app; its state is `app.state.proxy` (a `Proxy`). Calls are recorded to
    `sink` on the app's own loop, or by `process` (`stoker proxy`) in a child process."""
    proxy = Proxy(config, sink=sink, clock=clock, process=process)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await proxy.start()
        yield
        await proxy.aclose()

    app = Starlette(
        routes=[Route("/{path:path}", proxy.handle, methods=_METHODS)], lifespan=lifespan
    )
    app.state.proxy = proxy
    return app


def _named(exc: BaseException) -> str:
    """What went wrong, for the client and the record: the error's kind, and its text when
    it has one (aiohttp's say which host and why; none carries a header of the client's)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
