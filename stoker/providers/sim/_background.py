"""Serve an ASGI app on a free loopback port in a background thread.

Tests (Stoker's and a user's) drive the HTTP simulator with real clients without a
separate process: the port is bound before the server starts, so it is known and free,
and the call returns only once uvicorn accepts connections. It runs on the HTTP protocol
every Stoker server runs on (`stoker.http_server`), so tests meet the limits users do.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from stoker.http_server import server_config


class _Server(uvicorn.Server):
    """uvicorn's server plus an event set once it accepts connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedSim:
    """Where a background server listens: `url` for Anthropic clients, `openai_url` for OpenAI."""

    url: str
    app: Any

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"


@contextmanager
def serve_in_background(
    app: Any,
    *,
    host: str = "127.0.0.1",
    timeout: float = 10.0,
    sock: socket.socket | None = None,
) -> Iterator[ServedSim]:
    """Run `app` on a free port of `host` until the block ends, or on `sock`, a socket
    already bound (a test that holds a port before its server exists, to see what a
    client does while nothing answers there)."""
    if sock is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
    config = server_config(
        app,
        log_config=None,  # leave the host application's logging alone
        access_log=False,
        lifespan="off",
        ws="none",
    )
    server = _Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="stoker-sim-server", daemon=True
    )
    thread.start()
    try:
        if not server.ready.wait(timeout):
            raise RuntimeError(f"the simulator did not start within {timeout:.0f} s")
        bound_host, port = sock.getsockname()[:2]
        yield ServedSim(url=f"http://{bound_host}:{port}", app=app)
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
