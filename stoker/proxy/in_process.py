"""The proxy inside the user's own process: an HTTP client for the official SDKs.

`stoker.http_client()` is an `httpx2` client (what the `anthropic`, `openai` and
`google-genai` SDKs are built on, so each takes it as its `http_client`) whose transport
does what `stoker proxy` does (`stoker.proxy.core`, one implementation for both): every
call to a Messages, Chat Completions or Responses path is recorded with its cache
effect and explanation into the user's store, and with `optimize=True` rewritten the
way the proxy's `--optimize` rewrites it, with keep-warm pings while a conversation is
idle. No second process, no changed base URL: each request still goes where its SDK
addressed it, with its own key, through an ordinary `httpx2` transport.

In audit mode the transport hands the SDK's request to the inner transport as it is:
no byte of it changes, and none of the answer. What it adds is a copy of the answer's
bytes, read as they pass, and the recording after the answer is over.

Where the work runs: recording and keep-warm run on a daemon thread of the client's own,
with its own event loop, for a sync and an async client alike. Not on the async client's
loop: `asyncio.run` cancels what is still pending when the program's coroutine returns,
so the calls of a client nobody closed (most scripts) would be lost with their recording
tasks; a thread is drained when the client closes or, at the latest, when the process
exits, so every call that finished is stored. A store that cannot be written costs a
warning once; the user's call succeeds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal, overload

import httpx2

from stoker.cache.planner import CachePolicy
from stoker.clock import Clock
from stoker.proxy.client_thread import Engine
from stoker.proxy.core import ProxyConfig, ProxyCore
from stoker.proxy.lineage import LineageState
from stoker.proxy.recorder import Call
from stoker.proxy.recorder_process import RecorderProcess
from stoker.proxy.routes import dialect_at
from stoker.store.base import SqlEventStore
from stoker.store.open import open_store
from stoker.wire.dialects import Dialect
from stoker.wire.exchange import Exchange

log = logging.getLogger(__name__)

Recording = Literal["inline", "process"]
"""Where calls are recorded: in this process (on a thread of the client's), or in a child
process of its own, as `stoker proxy` records (no recording CPU beside the client's)."""


class InProcess(ProxyCore):
    """The core of one Stoker HTTP client, with the store it records into."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        database: str | None,
        clock: Clock | None,
        send: _Sender,
        recorder: Recording = "inline",
    ) -> None:
        # no I/O until the first call is recorded; the store migrates once, then
        self._store: SqlEventStore | None = open_store(database) if database else None
        self._send = send
        process = RecorderProcess(database) if recorder == "process" and database else None
        super().__init__(config, sink=self, clock=clock, process=process)

    @property
    def last_call(self) -> Exchange | None:
        """The latest call recorded: its record (`.record`, with `.explanation`), as
        `stoker report-proxy` shows it. Recording follows the answer: see `recorded`.
        (With `recorder="process"` the child has it: `recorded()` reads it back.)"""
        return self.last

    async def latest(self) -> Exchange | None:
        """Once every call so far is recorded, the latest one (read back from the store
        when a child process recorded it)."""
        await self.recorded()
        if self.process is None or self.process.last_stored is None or self._store is None:
            return self.last
        lineage, seq = self.process.last_stored
        calls = await self._store.proxy_calls(lineage)
        return next((c for c in calls if c.seq == seq), None)

    async def record_exchange(self, exchange: Exchange) -> None:
        """The sink: the store (None: calls are kept in `last_call` only)."""
        if self._store is not None:
            await self._store.record_exchange(exchange)

    async def post(self, lineage: LineageState, body: bytes) -> tuple[int, bytes]:
        return await self._send(lineage.origin + lineage.path, lineage.auth, body)

    async def close_all(self) -> None:
        await self.close_core()
        await self._send.aclose()
        if self._store is not None:
            await self._store.close()
            self._store = None


class _Sender:
    """How a keep-warm body reaches the provider from the engine's loop: a sync client's
    own transport (in a worker thread), or for an async client a transport of the
    engine's (the client's own belongs to the client's loop)."""

    def __init__(self, transport: httpx2.AsyncBaseTransport, *, owned: bool) -> None:
        self.transport = transport
        self.owned = owned

    async def aclose(self) -> None:
        if self.owned:
            await self.transport.aclose()

    async def __call__(
        self, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, bytes]:
        request = httpx2.Request("POST", url, headers=_without_length(headers), content=body)
        response = await self.transport.handle_async_request(request)
        try:
            raw = b"".join([chunk async for chunk in _aiter(response)])
        finally:
            await response.aclose()
        return response.status_code, _decoded(response.headers, raw)


def _without_length(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in ("content-length", "host")]


def _decoded(headers: httpx2.Headers, raw: bytes) -> bytes:
    """The answer as the recorder reads it: the bytes an SDK asked compressed, inflated."""
    if "content-encoding" not in headers:
        return raw
    try:
        return httpx2.Response(200, headers=headers, content=raw).read()
    except httpx2.DecodingError:
        return raw  # the recorder says it could not read it


async def _aiter(response: httpx2.Response) -> AsyncIterator[bytes]:
    stream = response.stream
    assert isinstance(stream, httpx2.AsyncByteStream)
    async for chunk in stream:
        yield chunk


def _started(
    core: InProcess, dialect: Dialect, request: httpx2.Request, body: bytes
) -> tuple[Call, httpx2.Request]:
    """The call an API request starts, and the request to send: the SDK's own, or in
    optimize mode one with the rewritten body."""
    call, sent = core.prepare(dialect, request.url.path, request.headers.multi_items(), body)
    if core.config.optimize:  # where its lineage's keep-warm pings go (audit sends none)
        call.origin = str(request.url.copy_with(path="/", query=None, fragment=None)).rstrip("/")
    if sent is body:
        return call, request
    headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"]
    rewritten = httpx2.Request(
        request.method, request.url, headers=headers, content=sent, extensions=request.extensions
    )
    return call, rewritten


def _answered(call: Call, response: httpx2.Response) -> None:
    call.status = response.status_code
    call.streamed = response.headers.get("content-type", "").startswith("text/event-stream")


def _unreached(core: InProcess, call: Call, began: float, exc: Exception) -> None:
    """A call the inner transport could not send: recorded as such; the SDK gets the
    transport's own error."""
    call.status, call.error = 502, f"the upstream could not be reached: {exc!r:.200}"
    core.finish(call, began)


class _Copy:
    """The answer's bytes on their way to the SDK, copied; the call recorded at the end
    (when the SDK closes the answer, read or not)."""

    def __init__(self, core: InProcess, call: Call, began: float, response: httpx2.Response):
        self._core, self._call, self._began = core, call, began
        self._headers = response.headers
        self._chunks: list[bytes] = []
        self._done = False
        _answered(call, response)

    def _keep(self, chunk: bytes) -> bytes:
        self._chunks.append(chunk)
        return chunk

    def _broken(self, exc: Exception) -> None:
        self._call.error = f"the upstream broke off the response: {type(exc).__name__}"

    def _end(self) -> None:
        if not self._done:
            self._done = True
            self._call.response = _decoded(self._headers, b"".join(self._chunks))
            self._core.finish(self._call, self._began)

    def relayed(self, response: httpx2.Response) -> httpx2.Response:
        """`response` with this copy as its stream."""
        stream: Any = self
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )


class _AsyncCopy(_Copy, httpx2.AsyncByteStream):
    def __init__(self, core: InProcess, call: Call, began: float, response: httpx2.Response):
        super().__init__(core, call, began, response)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        self._inner = response.stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield self._keep(chunk)
        except httpx2.TransportError as exc:
            self._broken(exc)
            raise

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._end()


class _SyncCopy(_Copy, httpx2.SyncByteStream):
    def __init__(self, core: InProcess, call: Call, began: float, response: httpx2.Response):
        super().__init__(core, call, began, response)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        self._inner = response.stream

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                yield self._keep(chunk)
        except httpx2.TransportError as exc:
            self._broken(exc)
            raise

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._end()


class AsyncStokerTransport(httpx2.AsyncBaseTransport):
    """Records (and in optimize mode rewrites) each API call around an inner transport."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, core: InProcess, engine: Engine) -> None:
        self.inner = inner
        self.core = core
        self.engine = engine

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        dialect = dialect_at(request.method, request.url.path)
        if dialect is None:
            return await self.inner.handle_async_request(request)
        call, sent = _started(self.core, dialect, request, await request.aread())
        began = time.perf_counter()
        try:
            response = await self.inner.handle_async_request(sent)
        except Exception as exc:
            _unreached(self.core, call, began, exc)
            raise
        return _AsyncCopy(self.core, call, began, response).relayed(response)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.engine.close)
        await self.inner.aclose()


class StokerTransport(httpx2.BaseTransport):
    """`AsyncStokerTransport` for a sync client."""

    def __init__(self, inner: httpx2.BaseTransport, core: InProcess, engine: Engine) -> None:
        self.inner = inner
        self.core = core
        self.engine = engine

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        dialect = dialect_at(request.method, request.url.path)
        if dialect is None:
            return self.inner.handle_request(request)
        call, sent = _started(self.core, dialect, request, request.read())
        began = time.perf_counter()
        try:
            response = self.inner.handle_request(sent)
        except Exception as exc:
            _unreached(self.core, call, began, exc)
            raise
        return _SyncCopy(self.core, call, began, response).relayed(response)

    def close(self) -> None:
        self.engine.close()
        self.inner.close()


class AsyncClient(httpx2.AsyncClient):
    """An `httpx2.AsyncClient` that records each API call; `last_call` is the latest."""

    stoker: InProcess
    engine: Engine

    @property
    def last_call(self) -> Exchange | None:
        return self.stoker.last_call

    async def recorded(self) -> Exchange | None:
        """Wait until every call so far is recorded (up to 30 s); the latest one."""
        return await asyncio.to_thread(self.engine.latest)


class Client(httpx2.Client):
    """An `httpx2.Client` that records each API call; `last_call` is the latest."""

    stoker: InProcess
    engine: Engine

    @property
    def last_call(self) -> Exchange | None:
        return self.stoker.last_call

    def recorded(self, timeout: float = 30.0) -> Exchange | None:
        """Wait until every call so far is recorded; the latest one."""
        return self.engine.latest(timeout)


@overload
def http_client(
    *,
    optimize: bool = ...,
    sync: Literal[False] = ...,
    db: str | Path | None = ...,
    transport: httpx2.AsyncBaseTransport | None = ...,
    policy: CachePolicy | None = ...,
    clock: Clock | None = ...,
    recorder: Recording = ...,
) -> AsyncClient: ...


@overload
def http_client(
    *,
    optimize: bool = ...,
    sync: Literal[True],
    db: str | Path | None = ...,
    transport: httpx2.BaseTransport | None = ...,
    policy: CachePolicy | None = ...,
    clock: Clock | None = ...,
    recorder: Recording = ...,
) -> Client: ...


def http_client(
    *,
    optimize: bool = False,
    sync: bool = False,
    db: str | Path | None = None,
    transport: httpx2.AsyncBaseTransport | httpx2.BaseTransport | None = None,
    policy: CachePolicy | None = None,
    clock: Clock | None = None,
    recorder: Recording = "inline",
) -> AsyncClient | Client:
    """An HTTP client for an official SDK that records every call's cache effect.

    `AsyncAnthropic(http_client=stoker.http_client())`, or for a sync SDK client
    `Anthropic(http_client=stoker.http_client(sync=True))`; the same for `openai`.
    `optimize=True` rewrites requests where the model cannot tell and keeps idle
    conversations warm, as `stoker proxy --optimize` does. Calls go to the store `db` (a
    SQLite path or a PostgreSQL URL; by default the one `stoker report-proxy` reads:
    STOKER_DATABASE_URL, else STOKER_DB, else stoker.db in STOKER_HOME).
    `transport`: the inner transport calls go through (default: `httpx2`'s own).
    `policy`: the breakpoint TTLs and time policy (Stoker's defaults). `recorder`:
    "inline" records on a thread of the client's own (never on an async client's loop);
    "process" in a child process, as `stoker proxy` does, so that no recording CPU sits
    beside the client's (for a model server that answers in milliseconds). Either way
    the calls that finished are stored when the client closes or the process exits.

    The client is an `httpx2.Client` (`sync=True`) or `httpx2.AsyncClient` with two more
    members: `last_call`, the latest call recorded (an `Exchange`: `.record` and its
    `.explanation`, `.rewrites`, `.error`), and `recorded()` (awaited on an async
    client), which waits until every call so far is recorded and returns the latest."""
    if recorder not in ("inline", "process"):
        raise ValueError(f"recorder={recorder!r}: expected 'inline' or 'process'")
    if sync and transport is not None and not isinstance(transport, httpx2.BaseTransport):
        raise TypeError("http_client(sync=True) needs an httpx2.BaseTransport")
    if not sync and transport is not None and not isinstance(transport, httpx2.AsyncBaseTransport):
        raise TypeError("http_client() needs an httpx2.AsyncBaseTransport (or pass sync=True)")
    config = ProxyConfig(optimize=optimize, policy=policy or CachePolicy())
    database = _database(db)
    engine = Engine()
    if sync:
        assert transport is None or isinstance(transport, httpx2.BaseTransport)
        inner_sync = transport or httpx2.HTTPTransport()
        send = _Sender(_Bridge(inner_sync), owned=False)
        core = engine.core = InProcess(
            config, database=database, clock=clock, send=send, recorder=recorder
        )
        core.bind(engine.loop)
        client = Client(transport=StokerTransport(inner_sync, core, engine))
        client.stoker, client.engine = core, engine
        return client
    assert transport is None or isinstance(transport, httpx2.AsyncBaseTransport)
    inner = transport or httpx2.AsyncHTTPTransport()
    send = _Sender(httpx2.AsyncHTTPTransport(), owned=True)
    core = engine.core = InProcess(
        config, database=database, clock=clock, send=send, recorder=recorder
    )
    core.bind(engine.loop)
    async_client = AsyncClient(transport=AsyncStokerTransport(inner, core, engine))
    async_client.stoker, async_client.engine = core, engine
    return async_client


class _Bridge(httpx2.AsyncBaseTransport):
    """A sync transport used from the engine's loop (a keep-warm ping), in a thread."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        def send() -> tuple[httpx2.Response, bytes]:
            response = self.inner.handle_request(request)
            try:
                return response, b"".join(response.iter_raw())
            finally:
                response.close()

        response, raw = await asyncio.to_thread(send)
        return httpx2.Response(response.status_code, headers=response.headers, content=raw)


def _database(db: str | Path | None) -> str:
    if db is not None:
        return str(db)
    import os

    from stoker.config import Config

    return str(Config.from_env(os.environ).database)
