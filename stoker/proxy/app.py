"""The proxy's ASGI app: bytes forwarded as they arrive, calls recorded after (what is
done to a call is `stoker.proxy.core`'s, shared with the in-process client).

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
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from stoker.errors import MissingExtra

try:
    import aiohttp
    from starlette.applications import Starlette
except ImportError as exc:  # the server stack is an extra: the proxy's report needs none
    raise MissingExtra("server", "stoker proxy", exc.name or "aiohttp") from exc
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from stoker.clock import Clock
from stoker.providers.sim._http import error_response
from stoker.proxy.core import ProxyConfig, ProxyCore, named
from stoker.proxy.lineage import LineageState
from stoker.proxy.recorder import Call, ExchangeSink
from stoker.proxy.routes import dialect_of, forwarded_headers, returned_headers, upstream_url

if TYPE_CHECKING:
    from stoker.proxy.recorder_process import RecorderProcess

log = logging.getLogger(__name__)

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


class Proxy(ProxyCore):
    """The core behind the app, with the upstream client the bytes travel through."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        sink: ExchangeSink | None,
        clock: Clock | None = None,
        process: RecorderProcess | None = None,
    ) -> None:
        super().__init__(config, sink=sink, clock=clock, process=process)
        self.upstream = upstream_url(config.upstream)
        self._client: aiohttp.ClientSession | None = None  # made on the loop that serves

    # -- a request ----------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        self._loop = asyncio.get_running_loop()
        path = request.url.path
        body = await request.body()
        outgoing = forwarded_headers(request.headers.items())
        dialect = dialect_of(path) if request.method == "POST" else None
        call = None
        if dialect is not None:
            call, body = self.prepare(dialect, path, outgoing, body)
        target = self.upstream + path + (f"?{request.url.query}" if request.url.query else "")
        began = time.perf_counter()
        try:
            upstream = await self.client().request(
                request.method, target, headers=outgoing, data=body
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            message = f"the proxy could not reach the upstream: {named(exc)}"
            if call is not None:
                call.status, call.error = 502, message
                self.finish(call, began)
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
                call.error = f"the upstream broke off the response: {named(exc)}"
        finally:
            upstream.release()
            if call is not None:
                call.response = b"".join(chunks)
                self.finish(call, began)

    async def post(self, lineage: LineageState, body: bytes) -> tuple[int, bytes]:
        target = self.upstream + lineage.path
        async with self.client().post(target, headers=lineage.auth, data=body) as got:
            return got.status, await got.read()

    async def aclose(self) -> None:
        await self.close_core()
        if self._client is not None:
            await self._client.close()
            self._client = None

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
