"""The ways a client reaches the simulator: directly (`stoker sim serve`), through
`stoker proxy` in audit mode and with `--optimize`, and (an SDK client's) through
`stoker.http_client()` in the same process, in each mode.

The contract tests run every check on each route: a contract the simulator keeps must
survive the proxy, which forwards what it does not rewrite and rewrites only what the
model cannot tell, and the in-process client, which does the same work in the client's
own transport. A plugin of the suite (`conftest.pytest_plugins`): `routes` serves the
servers for a module, and `claude` / `gpt` are official SDK clients, one per route
(`SDK_ROUTES`); a raw request has a URL to go to, so `ROUTES` are the served ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from stoker.clock import FrozenClock
from stoker.providers.sim.server import SimServer, create_app, serve_in_background
from stoker.proxy import ProxyConfig
from stoker.proxy import create_app as create_proxy
from stoker.proxy.in_process import http_client
from stoker.store.sqlite import SQLiteStore

ROUTES = ["direct", "proxy-audit", "proxy-optimize"]
SDK_ROUTES = [*ROUTES, "in-process-audit", "in-process-optimize"]

# Long enough for every model's minimum (1,024 tokens; 2,048-token steps on gpt-5.5).
SYSTEM = "You review pull requests for a Python team. " + "Keep every answer short. " * 600


@dataclass(frozen=True, slots=True, kw_only=True)
class Routes:
    """Base URLs by route name, and the simulator behind all of them."""

    urls: dict[str, str]
    sim: SimServer
    clock: FrozenClock
    folder: Path

    def http(self, route: str) -> tuple[str, httpx2.Client | None]:
        """The base URL an SDK client of `route` is given, and its HTTP client (None: the
        SDK's own): an in-process route sends to the simulator through Stoker's."""
        if not route.startswith("in-process-"):
            return self.urls[route], None
        mode = route.removeprefix("in-process-")
        db = self.folder / f"{route}.db"
        client = http_client(sync=True, optimize=mode == "optimize", db=db, clock=self.clock)
        return self.urls["direct"], client


@contextmanager
def serve_routes(tmp: Path) -> Iterator[Routes]:
    """One simulator, and two proxies (audit, optimize) in front of it, on one clock."""
    clock = FrozenClock()
    with ExitStack() as stack:
        upstream = stack.enter_context(serve_in_background(create_app(clock=clock)))
        urls = {"direct": upstream.url}
        for name, optimize in (("proxy-audit", False), ("proxy-optimize", True)):
            app = create_proxy(
                ProxyConfig(upstream=upstream.url, optimize=optimize),
                sink=SQLiteStore(tmp / f"{name}.db"),
                clock=clock,
            )
            urls[name] = stack.enter_context(serve_in_background(app)).url
            stack.callback(app.state.proxy.close_from_thread)
        yield Routes(urls=urls, sim=upstream.app.state.sim, clock=clock, folder=tmp)


def assert_refused(send: Callable[..., object], param: str, **extra: Any) -> None:
    """`send(**extra)` is refused with a 400 that names `param`, as OpenAI's API names
    the parameter it refuses, and carries a request id to quote."""
    with pytest.raises(openai.BadRequestError) as refused:
        send(**extra)
    assert refused.value.param == param
    assert refused.value.request_id is not None


def fresh_key() -> str:
    """A key of its own: its own cache workspace and stored responses."""
    return f"sk-sim-{uuid.uuid4().hex}"


def claude_client(url: str, http: httpx2.Client | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=fresh_key(), base_url=url, max_retries=0, http_client=http)


def gpt_client(url: str, http: httpx2.Client | None = None) -> openai.OpenAI:
    return openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=0, http_client=http)


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routes]:
    with serve_routes(tmp_path_factory.mktemp("routes")) as served:
        yield served


@pytest.fixture(params=SDK_ROUTES)
def claude(request: pytest.FixtureRequest, routes: Routes) -> Iterator[anthropic.Anthropic]:
    with claude_client(*routes.http(request.param)) as client:
        yield client


@pytest.fixture(params=SDK_ROUTES)
def gpt(request: pytest.FixtureRequest, routes: Routes) -> Iterator[openai.OpenAI]:
    with gpt_client(*routes.http(request.param)) as client:
        yield client
