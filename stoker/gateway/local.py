"""Throwaway gateways on loopback, for the benchmark and the tests.

One user with a random token, the simulator at 0 ms, a temporary SQLite file or a
throwaway PostgreSQL schema (created here, dropped on exit). In a thread of this process
(fast to start; the tests use it) or in a child `stoker serve` process, so a load
generator in this process does not share the gateway's interpreter lock and the
gateway's timings are its own (the benchmark uses that). The child's environment is the
caller's to give: this module reads none.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx2

from stoker.config import DEFAULT_LIMITS
from stoker.gateway.auth import TokenTable, token_digest
from stoker.gateway.config import GatewayConfig
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.store.base import SqlEventStore
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore

USER = "bench"


@contextmanager
def local_gateway(
    *,
    cache_size: int = DEFAULT_LIMITS.cache_size,
    postgres: str | None = None,
    process: bool = False,
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, str]]:
    """Yields (base URL, bearer token) of a gateway that lives as long as the block.

    `env` is the child process's environment (`process=True`; None: an empty one), less
    any STOKER_GATEWAY_* variable, so the config file written here decides.
    """
    token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="stoker-gateway-") as tmp:
        schema = f"bench_{uuid.uuid4().hex[:12]}" if postgres else None
        store: SqlEventStore = (
            PostgresStore(postgres, schema=schema) if postgres else SQLiteStore(Path(tmp) / "gw.db")
        )
        try:
            if process:
                asyncio.run(_prepare(store))  # the schema must exist before the child connects
                with _child(Path(tmp), token, cache_size, store, env or {}) as url:
                    yield url, token
            else:
                config = GatewayConfig(
                    tokens=TokenTable({token_digest(token): USER}),
                    limits=replace(DEFAULT_LIMITS, cache_size=cache_size),
                )
                with serve_in_thread(build_app(config, build_gateway(config, store=store))) as url:
                    yield url, token
        finally:
            if isinstance(store, PostgresStore):
                asyncio.run(_drop(store))


async def _prepare(store: SqlEventStore) -> None:
    await store.list_sessions(limit=1)
    await store.close()


async def _drop(store: PostgresStore) -> None:
    await store.drop_schema()
    await store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def database_of(store: SqlEventStore) -> str:
    """The `database` a child's config names for `store` (a schema: in its search path)."""
    if isinstance(store, PostgresStore):
        return dsn_in_schema(store.dsn, store.schema or "public")
    assert isinstance(store, SQLiteStore)
    return str(store.path)


def dsn_in_schema(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}options=-csearch_path%3D{schema}"


@dataclass(frozen=True, slots=True)
class Served:
    """A `stoker serve` child: where it answers, with which token, and its process id."""

    url: str
    token: str
    pid: int


@contextmanager
def _child(
    tmp: Path, token: str, cache_size: int, store: SqlEventStore, env: Mapping[str, str]
) -> Iterator[str]:
    with serve_process(tmp, database_of(store), token=token, cache_size=cache_size, env=env) as s:
        yield s.url


@contextmanager
def serve_process(
    tmp: Path,
    database: str,
    *,
    token: str,
    cache_size: int = DEFAULT_LIMITS.cache_size,
    env: Mapping[str, str],
    source: Path | None = None,
) -> Iterator[Served]:
    """`stoker serve` on a free loopback port, its config and log in `tmp`.

    `source`: the folder whose `stoker` package the child imports (on PYTHONPATH, and
    the child starts in `tmp`, so `python -m` does not pick the caller's folder); None:
    the installed one. Another checkout's code runs this way with this interpreter.
    """
    port = free_port()
    config = tmp / "gateway.toml"
    config.write_text(
        f'host = "127.0.0.1"\nport = {port}\ndatabase = "{database}"\n'
        f"[cache]\nsize = {cache_size}\n"
        # the bare simulated agent the figures were measured with, not the starter agent
        # a file without an [agent] table gets
        '[agent]\nprovider = "sim"\n'
        f'[[users]]\nid = "{USER}"\ntoken_sha256 = "{token_digest(token)}"\n',
        encoding="utf-8",
    )
    log = (tmp / "gateway.log").open("w")
    own = {k: v for k, v in env.items() if not k.startswith("STOKER_GATEWAY_")}
    own["STOKER_HOME"] = str(tmp)  # its simulator's cache file too is thrown away after
    if source is not None:
        own["PYTHONPATH"] = str(source)
    command = [sys.executable, "-m", "stoker", "serve", "--config", str(config)]
    child = subprocess.Popen(
        [*command, "--log-level", "warning"], stdout=log, stderr=log, env=own, cwd=tmp
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, child, tmp / "gateway.log")
        yield Served(url, token, child.pid)
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()


def wait_ready(
    url: str,
    child: subprocess.Popen[bytes],
    log: Path,
    timeout: float = 30.0,
    *,
    probe: str = "/healthz",
) -> None:
    """Until `url` answers 200 on `probe`; the child's log tail if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"the gateway exited at start:\n{log.read_text()[-2000:]}")
        try:
            if httpx2.get(url + probe, timeout=1.0).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the gateway did not answer within {timeout:.0f} s")
