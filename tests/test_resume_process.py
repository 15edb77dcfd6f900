"""Resume after the process exits: a subprocess creates a session and exits, another
resumes it. Tools and system are sent byte-identical and the first resumed request
reads the whole previous prefix from the (served) simulator's cache."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from stoker.providers.sim.server import create_app, serve_in_background
from stoker.store.base import SqlEventStore
from tests.store_fixtures import location

pytestmark = pytest.mark.slow  # child processes, each importing the SDKs

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests/scripts/resume_across_processes.py"


async def run_script(script: Path, *args: str) -> str:
    """Run a test script in a fresh Python process; its standard output."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_resume_after_process_exit_sends_identical_prefix_and_reads_it(
    store: SqlEventStore,
) -> None:
    where, schema = location(store)
    await store.list_sessions()  # create the schema before the children use it
    key, sid = f"sk-sim-{uuid.uuid4().hex}", f"s-{uuid.uuid4().hex[:8]}"
    with serve_in_background(create_app()) as served:
        sim = served.app.state.sim
        await run_script(SCRIPT, "create", where, schema or "-", served.url, key, sid)
        before = sim.sent_by(key)
        out = await run_script(SCRIPT, "resume", where, schema or "-", served.url, key, sid)
        after = sim.sent_by(key)[len(before) :]
    resumed = json.loads(out)
    last, first = before[-1], after[0]
    assert json.dumps(first["tools"]) == json.dumps(last["tools"])
    assert first["system"] == [{**b} for b in last["system"]]
    last_record = (await store.load(sid)).last_record
    assert last_record is not None
    stored = [
        json.loads(body) for _, kind, _, body in await store.events(sid) if kind == "cache_recorded"
    ]
    previous = stored[-2]["usage"]  # the create process's last call
    assert (
        resumed["usage"]["read"]
        == previous["read"] + previous["written_5m"] + previous["written_1h"]
    )
    assert resumed["why"] == "hit"
