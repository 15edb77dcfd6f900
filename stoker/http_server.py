"""Every HTTP server Stoker runs (the gateway, the proxy, the simulator, the benchmarks'
workload server) starts here, on uvicorn with one hardened HTTP protocol.

httptools was chosen for speed (see pyproject), but it takes whatever a client sends:
a 20 MB header is buffered whole and answered, and `GET /` with no version (HTTP/0.9)
is served. `HardenedHttpTools` keeps httptools and answers as real servers do:

- a request head (request line and headers) over `MAX_HEAD_BYTES` gets 431 and the
  connection closes without reading the rest;
- a request line without HTTP/1.0 or HTTP/1.1, or one httptools cannot parse, gets 400.

`QuietDisconnects` wraps every app: a client that hangs up before its body ends makes
Starlette raise `ClientDisconnect` in the handler; that is the client's business, so it
is one INFO line, and nothing (no 500) is sent after it.

    run(app, host=..., port=...)        # in the foreground, as `uvicorn.run`
    uvicorn.Server(server_config(app))  # for a server in a thread of the caller's
"""

from __future__ import annotations

import http
import logging
from typing import Any

from stoker.errors import MissingExtra

try:
    import httptools
    import uvicorn
except ImportError as exc:  # the server stack is an extra: the core has no server
    raise MissingExtra("server", "serving HTTP", exc.name or "uvicorn") from exc
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["MAX_HEAD_BYTES", "HardenedHttpTools", "QuietDisconnects", "run", "server_config"]

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
"""The largest request line plus headers taken. A provider SDK's head is about 1 KiB; this
leaves room for long cookies and tracing headers (Node.js takes 16 KiB, Envoy 60 KiB)."""

_VERSIONS = frozenset({"1.0", "1.1"})


class _Refusal(Exception):
    """Raised from a parser callback to stop parsing; `data_received` answers it."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class HardenedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a limit on the request head and HTTP/1.x only.

    httptools hands over a header only once it is complete, so the size is checked
    twice: exactly when the head is complete (from its parsed parts), and, while it is
    not, from the bytes received since the chunk it began in, so a head that never ends
    is cut off within one read (256 KiB) of the limit instead of buffered whole.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._heads = 0  # request heads begun on this connection
        self._head_open = False  # one has begun and is not complete
        self._head_bytes = 0  # its bytes after the chunk it began in
        self._refusal: _Refusal | None = None

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        heads, was_open = self._heads, self._head_open
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as exc:
            self._refuse(self._refusal or _Refusal(400, f"invalid HTTP request: {exc}"))
            return
        if was_open and self._head_open and heads == self._heads:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(_too_large())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._heads += 1
        self._head_open = True
        self._head_bytes = 0

    def on_headers_complete(self) -> None:
        self._head_open = False
        # The head as sent: "METHOD URL HTTP/1.1\r\n", "name: value\r\n" each, "\r\n".
        size = len(self.parser.get_method()) + len(self.url) + 13
        size += sum(len(name) + len(value) + 4 for name, value in self.headers)
        version = self.parser.get_http_version()
        if size > MAX_HEAD_BYTES:
            self._refusal = _too_large()
        elif version not in _VERSIONS:
            self._refusal = _Refusal(400, f"HTTP/1.0 or HTTP/1.1 only, not {version}")
        if self._refusal is not None:
            raise self._refusal
        super().on_headers_complete()

    def _refuse(self, refusal: _Refusal) -> None:
        """Answer `refusal` and close (unread bytes stay unread), as uvicorn's own 400."""
        body = refusal.reason.encode("ascii", "replace")
        content = [STATUS_LINE[refusal.status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("refused a request from %s: %d %s", client, refusal.status, refusal.reason)


def _too_large() -> _Refusal:
    phrase = http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE.phrase
    return _Refusal(431, f"{phrase}: the request head is over {MAX_HEAD_BYTES:,} bytes")


class HttpMiddleware:
    """An ASGI middleware with a say over HTTP requests only (`http`); lifespan and
    websocket messages go straight through to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class QuietDisconnects(HttpMiddleware):
    """An ASGI app that logs a client's hang-up mid-request as one INFO line.

    Once `receive` has said the client is gone, nothing more is sent: Starlette's last
    resort would otherwise answer the `ClientDisconnect` with a 500 nobody can read.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = False

        async def watched() -> Message:
            nonlocal gone
            message = await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        async def unless_gone(message: Message) -> None:
            if not gone:
                await send(message)

        try:
            await self.app(scope, watched, unless_gone)
        except ClientDisconnect:
            log.info(
                "the client closed the connection before its request ended: %s %s",
                scope["method"],
                scope["path"],
            )


def server_config(app: ASGIApp, **options: Any) -> uvicorn.Config:
    """uvicorn's `Config` for `app` on `HardenedHttpTools`, wrapped in `QuietDisconnects`;
    `options` are `uvicorn.Config`'s (host, port, lifespan, ws, log_level, ...)."""
    return uvicorn.Config(QuietDisconnects(app), http=HardenedHttpTools, **options)


def run(app: ASGIApp, **options: Any) -> None:
    """Serve `app` in the foreground until SIGINT or SIGTERM, as `uvicorn.run` does (and
    exits as it does when the server cannot start); `options` as `server_config`'s."""
    uvicorn.run(QuietDisconnects(app), http=HardenedHttpTools, **options)
