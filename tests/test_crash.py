"""A process killed between a tool_use and its result loses nothing it acknowledged, and
its session resumes into a request the provider accepts."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from stoker.store.base import SqlEventStore
from tests.helpers import sim_agent
from tests.scripts.crash_mid_turn import SYSTEM, make_tool
from tests.store_fixtures import location

ROOT = Path(__file__).resolve().parent.parent


async def test_sigkill_mid_turn_loses_no_acknowledged_event_and_resumes(
    store: SqlEventStore, tmp_path: Path
) -> None:
    where, schema = location(store)
    await store.list_sessions()  # create the schema before the child races for it
    marker = tmp_path / "tool-started"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests/scripts/crash_mid_turn.py"),
        where,
        schema or "-",
        str(marker),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert child.returncode is None, "the child exited before its tool started"
        assert time.monotonic() < deadline, "the child's tool never started"
        await asyncio.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    raw, _ = await asyncio.wait_for(child.communicate(), timeout=10)
    out = raw.decode()
    acked = [line.split()[1] for line in out.splitlines() if line.startswith("ack ")]
    assert acked == ["session_created", "message_appended", "cache_recorded", "message_appended"]

    stored = [kind for _, kind, _, _ in await store.events("crashed")]
    assert stored == acked  # nothing acknowledged was lost, nothing half-written appeared

    agent, provider = sim_agent(tools=[make_tool(None)], system=SYSTEM)
    resumed = await agent.open(store, "crashed", create=False)
    interrupted = resumed.history[-1].tool_results[0]
    assert interrupted.is_error
    assert interrupted.content.startswith("interrupted: the process stopped")
    result = await resumed.send("carry on")  # the sim rejects unanswered tool_use with a 400
    assert result.exit == "answered"
    assert provider.requests[-1]["messages"][2]["content"][0]["tool_use_id"] == (
        resumed.history[1].tool_calls[0].id
    )
    assert [kind for _, kind, _, _ in await store.events("crashed")][:4] == acked
