"""MCP servers written for the integration tests with the `mcp` SDK, run as scripts."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stoker.integrations import McpStdio

HERE = Path(__file__).parent
SHUFFLING = HERE / "shuffling_server.py"
HANGING = HERE / "hanging_server.py"


def shuffling_stdio(state_dir: Path, **env: str) -> McpStdio:
    """The shuffling server over stdio; its start counter and log live in `state_dir`."""
    return McpStdio(
        command=sys.executable,
        args=(
            str(SHUFFLING),
            "--state",
            str(state_dir / "starts"),
            "--log",
            str(state_dir / "log"),
        ),
        env=env,
    )


def hanging_stdio() -> McpStdio:
    return McpStdio(command=sys.executable, args=(str(HANGING),))


@contextmanager
def serving_http(log: Path, *, token: str) -> Iterator[str]:
    """The shuffling server over streamable HTTP on 127.0.0.1 (a free port), in a
    thread; requests without `Authorization: Bearer <token>` get a 401. Yields the URL."""
    import uvicorn
    from starlette.responses import PlainTextResponse

    from tests.mcp_servers.shuffling_server import build_server

    app = build_server(0, log).streamable_http_app()
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization") != expected:
            await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    server = uvicorn.Server(
        uvicorn.Config(guarded, host="127.0.0.1", port=0, log_level="error", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="mcp-http-test-server")
    thread.start()
    try:
        deadline = time.monotonic() + 10.0
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.started, "the test HTTP server did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
