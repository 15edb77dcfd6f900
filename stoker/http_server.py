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

A command that serves (`stoker serve`, `stoker proxy`, `stoker sim serve`) takes its
port before it says anything, and says it only once the app has started:

    sockets = listen(host, port, owner="stoker serve", port_flag="--port", host_flag="--host")
    serve(app, sockets, started=lambda: print("serving"))  # in the foreground

`listen` turns what the operating system refuses (a port in use, a port below 1024, an
address of another machine) into one `ConfigError` that says what to pick instead, and
`serve` raises a `StokerError` the app's startup raised instead of logging its traceback;
the CLI prints either as one line.

    run(app, host=..., port=...)        # in the foreground, as `uvicorn.run`
    uvicorn.Server(server_config(app))  # for a server in a thread of the caller's
"""

from __future__ import annotations

import errno
import gc
import http
import logging
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

from stoker.errors import ConfigError, MissingExtra, PortInUse, StokerError

try:
    import httptools
    import uvicorn
except ImportError as exc:  # the server stack is an extra: the core has no server
    raise MissingExtra("server", "serving HTTP", exc.name or "uvicorn") from exc
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = [
    "GC_YOUNG_THRESHOLD",
    "MAX_HEAD_BYTES",
    "HardenedHttpTools",
    "QuietDisconnects",
    "base_url",
    "listen",
    "run",
    "serve",
    "server_config",
]

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
"""The largest request line plus headers taken. A provider SDK's head is about 1 KiB; this
leaves room for long cookies and tracing headers (Node.js takes 16 KiB, Envoy 60 KiB)."""

_VERSIONS = frozenset({"1.0", "1.1"})

GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation in a serving process
(CPython's default is 700). Reference counting frees a request's objects as it ends; the
collector is only for cycles, and at 700 a gateway turn set it off several times, each
pass walking what the turn had just made. Young cycles wait a little longer instead."""


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


def listen(
    host: str, port: int, *, owner: str, port_flag: str, host_flag: str
) -> list[socket.socket]:
    """Sockets listening on `port` of every address `host` names (one for "127.0.0.1",
    two for "localhost"), bound as uvicorn binds them, for `serve`. What the system
    refuses is a `ConfigError` naming the option that fixes it (`port_flag`, `host_flag`);
    a port in use is `PortInUse`, which guesses another `owner` ("stoker serve") holds it.
    Port 0 takes a free port (the sockets' `getsockname()` says which)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"{port} is not a port number (1 to 65535): pick one with {port_flag}")
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot listen on {host!r}: {exc.strerror}; give {host_flag} an address of this "
            "machine (127.0.0.1 for it alone, 0.0.0.0 for every interface)"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            if os.name == "posix":  # as asyncio does: a restart need not wait out TIME_WAIT
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio does: IPv4 gets a socket of its own
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen()  # a second bind with SO_REUSEADDR fails only here
            sock.set_inheritable(True)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise _refused(
            exc, host, port, owner=owner, port_flag=port_flag, host_flag=host_flag
        ) from None
    return sockets


def base_url(host: str, port: int) -> str:
    """`http://host:port`, an IPv6 address in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _refused(
    exc: OSError, host: str, port: int, *, owner: str, port_flag: str, host_flag: str
) -> ConfigError:
    if exc.errno == errno.EADDRINUSE:
        return PortInUse(host, port, owner=owner, flag=port_flag)
    if exc.errno == errno.EACCES:
        return ConfigError(
            f"no permission to listen on port {port} on {host} (ports below 1024 need "
            f"root): pick a port above 1023 with {port_flag}"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return ConfigError(
            f"cannot listen on {host}: it is not an address of this machine; give "
            f"{host_flag} 127.0.0.1 (this machine alone) or 0.0.0.0 (every interface)"
        )
    return ConfigError(f"cannot listen on port {port} on {host}: {exc.strerror or exc}")


class _StartupErrors:
    """An ASGI app whose lifespan startup, when it raises a `StokerError`, fails without
    uvicorn logging the traceback: the error is kept in `error` for `serve` to raise."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.error: StokerError | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        failed: list[Message] = []

        async def held(message: Message) -> None:
            # Starlette sends "startup.failed", with the traceback, before it re-raises.
            if message["type"] == "lifespan.startup.failed":
                failed.append(message)
            else:
                await send(message)

        try:
            await self.app(scope, receive, held)
        except StokerError as exc:
            if not failed:
                raise
            self.error = exc
            await send({"type": "lifespan.startup.failed", "message": ""})
            return
        except BaseException:
            if failed:
                await send(failed[0])
            raise
        if failed:
            await send(failed[0])


class _Server(uvicorn.Server):
    """uvicorn's server, calling `started` once the app started and the sockets serve."""

    def __init__(self, config: uvicorn.Config, started: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_started = started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            _settle_collector()
            if self._on_started is not None:
                self._on_started()


def _settle_collector() -> None:
    """Tune the garbage collector for a process that now only serves: what start-up made
    (modules, classes, the app; about 100,000 objects in `stoker serve`) is frozen, so the
    collector never walks it again, and the youngest generation is collected less often
    (`GC_YOUNG_THRESHOLD`). Before, a fifth of the gateway's server CPU time per message
    went to collections that found almost nothing: most of it walking start-up's objects
    in full collections, the rest passes over each turn's young objects.

    Called once the app has started, in the serving process only (`serve`): not by an
    app served in a thread of someone else's process."""
    gc.collect()  # start-up's own garbage cycles, so that none is frozen
    gc.freeze()
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), *older)


def serve(
    app: ASGIApp,
    sockets: Sequence[socket.socket],
    *,
    started: Callable[[], None] | None = None,
    **options: Any,
) -> None:
    """Serve `app` on `sockets` (from `listen`) in the foreground until SIGINT or SIGTERM;
    `started` is called once the app's startup succeeded and the sockets serve (where a
    command says it is up). A `StokerError` from the app's startup is raised here;
    another startup failure exits as `uvicorn.run` does (status 3). `options` as
    `server_config`'s."""
    guarded = _StartupErrors(app)
    server = _Server(server_config(guarded, **options), started)
    try:
        server.run(sockets=list(sockets))
    except SystemExit:
        if guarded.error is not None:
            raise guarded.error from None
        raise
    except KeyboardInterrupt:  # the Ctrl-C that stopped it, which uvicorn raises again
        pass
    finally:
        for sock in sockets:
            sock.close()
