"""A simulator behind `stoker proxy`, both on loopback, for the proxy's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.clock import FrozenClock
from stoker.providers.sim.server import SimServer, create_app, serve_in_background
from stoker.proxy import ProxyConfig
from stoker.proxy import create_app as create_proxy
from stoker.proxy.app import Proxy
from stoker.proxy.recorder_process import RecorderProcess
from stoker.store.sqlite import SQLiteStore

# Long enough for every model's minimum (1,024 tokens; 2,048-token steps on gpt-5.5).
SYSTEM = "You review pull requests for a Python team. " + "Keep every answer short. " * 600
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file of the repository and return its text.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file to read."}},
            "required": ["path"],
        },
    }
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Behind:
    """A simulator reached through the proxy, and one reached directly, on one clock."""

    url: str  # the proxy
    direct: str  # a second, identical simulator without the proxy
    sim: SimServer  # the simulator behind the proxy
    direct_sim: SimServer
    proxy: Proxy
    db: Path
    clock: FrozenClock

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def recorded(self) -> None:
        assert self.proxy.wait_recorded(), "the proxy did not finish recording in time"


RECORDING = ["inline", "process"]  # on the proxy's loop, or in `stoker proxy`'s child process


@contextmanager
def behind_proxy(
    tmp: Path, *, optimize: bool = False, recording: str = "inline", **config: Any
) -> Iterator[Behind]:
    clock = FrozenClock()
    tmp.mkdir(parents=True, exist_ok=True)
    db = tmp / "proxy.db"
    with ExitStack() as stack:
        upstream = stack.enter_context(serve_in_background(create_app(clock=clock)))
        direct = stack.enter_context(serve_in_background(create_app(clock=clock)))
        process = RecorderProcess(str(db)) if recording == "process" else None
        app = create_proxy(
            ProxyConfig(upstream=upstream.url, optimize=optimize, **config),
            sink=SQLiteStore(db) if process is None else None,
            clock=clock,
            process=process,
        )
        proxied = stack.enter_context(serve_in_background(app))
        stack.callback(app.state.proxy.close_from_thread)
        yield Behind(
            url=proxied.url,
            direct=direct.url,
            sim=upstream.app.state.sim,
            direct_sim=direct.app.state.sim,
            proxy=app.state.proxy,
            db=db,
            clock=clock,
        )
