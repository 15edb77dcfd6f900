"""Resume after the process exits: a subprocess creates a session and exits, another
resumes it. Tools and system are sent byte-identical and the first resumed request
reads the whole previous prefix from the (served) simulator's cache."""

from __future__ import annotations

import json

import pytest

from stoker.store.base import SqlEventStore
from tests.child_processes import children

pytestmark = pytest.mark.slow  # child processes, each importing the SDKs


async def test_resume_after_process_exit_sends_identical_prefix_and_reads_it(
    store: SqlEventStore,
) -> None:
    async with children(store, "resume_across_processes.py") as procs:
        await procs.run("create")
        before = procs.sent()
        out = await procs.run("resume")
        after = procs.sent()[len(before) :]
    resumed = json.loads(out)
    last, first = before[-1], after[0]
    assert json.dumps(first["tools"]) == json.dumps(last["tools"])
    assert first["system"] == [{**b} for b in last["system"]]
    last_record = (await store.load(procs.sid)).last_record
    assert last_record is not None
    stored = [
        json.loads(body)
        for _, kind, _, body in await store.events(procs.sid)
        if kind == "cache_recorded"
    ]
    previous = stored[-2]["usage"]  # the create process's last call
    assert (
        resumed["usage"]["read"]
        == previous["read"] + previous["written_5m"] + previous["written_1h"]
    )
    assert resumed["why"] == "hit"
