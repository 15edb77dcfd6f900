"""The recipes of docs/frameworks.md, run as the tests run them: each example's `converse`
(the code a user's agent already has) driven through `stoker.http_client()`, or through a
plain `httpx2` client, against a simulator of its own; what reached the network and what
the store recorded.

An example is the page's python block under a heading (`## pydantic-ai`), the n-th one
there; it runs as a module (its `__main__` part is for readers, and for
tests/test_docs_examples.py). The SDKs find the simulator as a user's would find a
provider: `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` and a key in the environment.
"""

from __future__ import annotations

import asyncio
import inspect
import linecache
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from stoker.clock import FrozenClock
from stoker.providers.sim.server import create_app, serve_in_background
from stoker.proxy.in_process import http_client
from stoker.store.open import open_store
from stoker.wire.exchange import Exchange
from tests.doc_examples import ROOT, blocks

PAGE = ROOT / "docs" / "frameworks.md"
KEY = "sk-sim-frameworks"  # one key for every run: the simulator answers a key's calls alike

# What differs between two runs by construction: each has a simulator of its own, on a port
# of its own. Every other header, the path and the body must be the same bytes.
VOLATILE = frozenset({"host"})


def example(heading: str, index: int = 0) -> dict[str, Any]:
    """The namespace of the `index`-th python block under `heading`, run as a module."""
    text = PAGE.read_text(encoding="utf-8").splitlines()
    start = text.index(heading) + 1
    end = next((i for i in range(start, len(text)) if text[i].startswith("## ")), len(text))
    code = [b for b in blocks(PAGE) if b.language == "python" and start < b.line <= end][index]
    # its source where `inspect.getsource` looks (smolagents reads a tool's source)
    linecache.cache[code.id] = (len(code.code), None, code.code.splitlines(True), code.id)
    namespace: dict[str, Any] = {"__name__": f"frameworks_example_{code.line}"}
    exec(compile(code.code, code.id, "exec"), namespace)
    return namespace


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """A request as the network transport was handed it."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @classmethod
    def of(cls, request: httpx2.Request, body: bytes) -> Sent:
        headers = tuple((k, v) for k, v in request.headers.multi_items() if k not in VOLATILE)
        path = request.url.raw_path.decode()
        return cls(method=request.method, path=path, headers=headers, body=body)


@dataclass(slots=True)
class Recording(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """httpx2's own transports (sync and async), keeping a copy of each request."""

    sent: list[Sent] = field(default_factory=list)
    sync: httpx2.HTTPTransport = field(default_factory=httpx2.HTTPTransport)
    asynchronous: httpx2.AsyncHTTPTransport = field(default_factory=httpx2.AsyncHTTPTransport)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(Sent.of(request, request.read()))
        return self.sync.handle_request(request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(Sent.of(request, await request.aread()))
        return await self.asynchronous.handle_async_request(request)

    def close(self) -> None:
        self.sync.close()

    async def aclose(self) -> None:
        await self.asynchronous.aclose()


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One conversation: what it answered, what the network was sent, what was stored."""

    answers: list[str]
    sent: list[Sent]
    lineages: list[list[Exchange]]

    @property
    def verdicts(self) -> list[list[str]]:
        return [
            [x.record.explanation.verdict if x.record else f"error: {x.error}" for x in calls]
            for calls in self.lineages
        ]


@contextmanager
def simulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[FrozenClock]:
    """A fresh simulator on a frozen clock, where the SDKs' environment points."""
    clock = FrozenClock()
    with serve_in_background(create_app(clock=clock)) as sim, monkeypatch.context() as env:
        for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            env.setenv(name, KEY)
        env.setenv("ANTHROPIC_BASE_URL", sim.url)
        env.delenv("ANTHROPIC_API_URL", raising=False)
        env.delenv("OPENAI_API_BASE", raising=False)
        env.setenv("OPENAI_BASE_URL", sim.openai_url)
        yield clock


Converse = Callable[[Any], Any]


def drive(
    converse: Converse, monkeypatch: pytest.MonkeyPatch, db: Path | None, *, optimize: bool = False
) -> Run:
    """`converse` on a fresh simulator through Stoker's client recording into `db`, or
    (db None) through a plain httpx2 client; the same network transport either way."""
    network = Recording()
    asynchronous = inspect.iscoroutinefunction(converse)
    with simulator(monkeypatch) as clock:
        if asynchronous:

            async def run() -> list[str]:
                if db is None:
                    http: httpx2.AsyncClient = httpx2.AsyncClient(transport=network)
                else:
                    http = http_client(optimize=optimize, db=db, clock=clock, transport=network)
                async with http:
                    answers: list[str] = await converse(http)
                    return answers

            answers = asyncio.run(run())
        else:
            sync: httpx2.Client = (
                httpx2.Client(transport=network)
                if db is None
                else http_client(
                    sync=True, optimize=optimize, db=db, clock=clock, transport=network
                )
            )
            with sync:
                answers = converse(sync)
    return Run(answers=answers, sent=network.sent, lineages=stored(db) if db else [])


def stored(db: Path) -> list[list[Exchange]]:
    """Every call `db` holds, by lineage."""

    async def read() -> list[list[Exchange]]:
        store = open_store(str(db))
        try:
            return [await store.proxy_calls(x.id) for x in await store.proxy_lineages()]
        finally:
            await store.close()

    return asyncio.run(read())
