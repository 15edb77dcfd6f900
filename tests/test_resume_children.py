"""A fork, a background review and a sub-agent each resume in a new process sending
what their live continuation would have sent: the parent's prefix, the whole history
they had (the parent's part included) and the new message, reading all of it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stoker.store.base import SqlEventStore
from stoker.wire.usage import Usage
from tests.child_processes import children
from tests.helpers import without_markers

pytestmark = pytest.mark.slow  # child processes, each importing the SDKs


async def test_each_child_role_resumes_in_a_new_process_as_it_would_have_continued(
    store: SqlEventStore,
) -> None:
    async with children(store, "resume_children_across_processes.py") as procs:
        sid = procs.sid
        made = json.loads(await procs.run("create"))
        sent = procs.sent()
        callers: list[str] = made["callers"]
        assert len(sent) == len(callers)
        roles = {}
        for child in {c for c in callers if c != sid}:
            roles[(await store.load(child)).role] = child
        assert set(roles) == {"fork", "review", "subagent"}
        for role, child in sorted(roles.items()):
            last = sent[max(i for i, c in enumerate(callers) if c == child)]
            stored = await store.load(child)
            assert stored.last_record is not None
            assert len(stored.messages) == len(last["messages"]) + 1, role  # + its answer
            before = len(procs.sent())
            out = await procs.run("resume", child)
            resumed, (first,) = json.loads(out), procs.sent()[before:]
            assert json.dumps(without_markers(first["tools"])) == json.dumps(
                without_markers(last["tools"])
            ), role
            _assert_continued(first, last, resumed, stored.last_record.usage, role)


def _settings(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in ("messages", "tools", "system")}


def _assert_continued(
    first: dict[str, Any],
    last: dict[str, Any],
    resumed: dict[str, Any],
    previous: Usage,
    role: str = "",
) -> None:
    """The resumed session's first call (`first`, which `resumed` reports) sent what its
    live continuation would have after `last`: the same system and settings, the history
    `last` sent, the stored answer and the new message; and it read all that `last` read
    and wrote (`previous`)."""
    assert without_markers(first["system"]) == without_markers(last["system"]), role
    assert _settings(first) == _settings(last), role
    sent_now = without_markers(first["messages"])
    assert sent_now[:-2] == without_markers(last["messages"]), role
    assert sent_now[-2]["role"] == "assistant", role  # the answer it had stored
    assert sent_now[-1]["content"][-1]["text"] == "and one more thing", role
    assert resumed["why"] == "hit", role
    assert resumed["usage"]["read"] == previous.read + previous.written, role


async def test_a_compacted_session_resumes_in_a_new_process_with_the_compacted_history(
    store: SqlEventStore,
) -> None:
    async with children(store, "compacted_across_processes.py") as procs:
        sid = procs.sid
        made = json.loads(await procs.run("create"))
        assert made["turns"] >= 3
        last = procs.sent()[-1]  # the live session's call after its compaction
        stored = await store.load(sid)
        assert stored.epoch == 1
        assert stored.messages[0].text.startswith("Summary of the earlier part")
        out = await procs.run("resume")
        resumed, (first,) = json.loads(out), procs.sent()[len(procs.sent()) - 1 :]
        # byte for byte the compacted history the live session sent, then its stored
        # answer and the new message; never the history it replaced
        assert first["system"] == last["system"]
        assert stored.last_record is not None
        _assert_continued(first, last, resumed, stored.last_record.usage)
        assert not any("turn 0 word" in json.dumps(m) for m in first["messages"][1:])
