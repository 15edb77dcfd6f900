"""What the tests that run Stoker in child processes share: Python started fresh at the
repository's root, and for the resume tests a served simulator and a store that the
children of one test (`tests/scripts/*_across_processes.py`) talk to in turn."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stoker.providers.sim.server import SimServer, create_app, serve_in_background
from stoker.store.base import SqlEventStore
from tests.store_fixtures import location

ROOT = Path(__file__).resolve().parent.parent


async def run_python(*args: str, seconds: float = 60) -> str:
    """`python *args` in a fresh process at the repository's root, which must exit 0;
    its standard output. It has `seconds` to finish."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=seconds)
    assert proc.returncode == 0, err.decode()
    return out.decode()


@dataclass(frozen=True, slots=True, kw_only=True)
class Children:
    """The served simulator (`sim`) and the store the child processes of one test share,
    all calling under one new API key; `run` starts `script ACTION WHERE SCHEMA URL KEY
    SID`, by default on the session `sid` the test makes."""

    script: Path
    store_args: tuple[str, str]
    url: str
    key: str
    sim: SimServer
    sid: str = field(default_factory=lambda: f"s-{uuid.uuid4().hex[:8]}")

    async def run(self, action: str, sid: str | None = None) -> str:
        """The child's standard output."""
        args = (action, *self.store_args, self.url, self.key, sid or self.sid)
        return await run_python(str(self.script), *args)

    def sent(self) -> list[dict[str, Any]]:
        """The bodies the children sent, in order."""
        return self.sim.sent_by(self.key)


@asynccontextmanager
async def children(store: SqlEventStore, script: str) -> AsyncIterator[Children]:
    """Children running `tests/scripts/<script>` on `store`, its schema made before they
    use it."""
    where, schema = location(store)
    await store.list_sessions()
    with serve_in_background(create_app()) as served:
        yield Children(
            script=ROOT / "tests/scripts" / script,
            store_args=(where, schema or "-"),
            url=served.url,
            key=f"sk-sim-{uuid.uuid4().hex}",
            sim=served.app.state.sim,
        )
