"""The memory and skill tools end to end, through the dispatcher, with provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stoker.clock import FrozenClock
from stoker.memory import (
    BACKGROUND_REVIEW,
    DIRECT,
    MemoryStore,
    Provenance,
    SkillStore,
    WriteRecord,
    memory_toolset,
    read_log,
    skills_toolset,
)
from stoker.tools import DispatchPolicy, Tool, ToolContext, Toolset, run_tool_calls
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock

STAMP = "2026-09-21T14:13:20.000+00:00"  # FrozenClock's default instant


def _call(n: int, tool: str, /, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{n}", name=tool, input_json=json.dumps(arguments))


def _foreground(call: ToolUseBlock) -> ToolContext:
    return ToolContext(session_id="s-main", tool_use_id=call.id)


async def _run(
    toolsets: list[Toolset],
    calls: list[ToolUseBlock],
    context_factory: Any = _foreground,
    **kwargs: Any,
) -> list[ToolResultBlock]:
    table: dict[str, Tool] = {t.name: t for ts in toolsets for t in ts.tools}
    return await run_tool_calls(calls, table, context_factory=context_factory, **kwargs)


def _ok(n: int, content: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=f"toolu_{n}", content=content)


def _err(n: int, content: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=f"toolu_{n}", content=content, is_error=True)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


@pytest.fixture
def memory(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "memory", clock=FrozenClock())


@pytest.fixture
def skills(tmp_path: Path) -> SkillStore:
    return SkillStore(tmp_path / "skills", clock=FrozenClock())


def test_toolsets_advertise_the_documented_tools() -> None:
    memory = memory_toolset(MemoryStore("unused"))
    skills = skills_toolset(SkillStore("unused"))
    assert (memory.name, memory.names) == ("memory", ("memory",))
    assert (skills.name, skills.names) == ("skills", ("skill_manage", "skill_view"))
    flags = {t.name: (t.concurrent, t.risky) for t in (*memory.tools, *skills.tools)}
    # never risky (the review denies risky tools); writers keep the model's order
    assert flags == {
        "memory": (False, False),
        "skill_view": (True, False),
        "skill_manage": (False, False),
    }
    schema = memory.tools[0].input_schema
    assert sorted(schema["properties"]) == ["action", "old_text", "target", "text"]
    assert schema["required"] == ["action", "target"]
    assert "context" not in json.dumps([t.input_schema for t in skills.tools])


async def test_memory_tool_adds_replaces_and_removes(memory: MemoryStore) -> None:
    tools = [memory_toolset(memory)]
    results = await _run(
        tools,
        [
            _call(1, "memory", action="add", target="memory", text="Deploy with make ship."),
            _call(2, "memory", action="add", target="memory", text="Staging is stg-1."),
            _call(3, "memory", action="replace", target="memory", old_text="stg", text="Stg: s2."),
            _call(4, "memory", action="remove", target="memory", old_text="make ship"),
            _call(5, "memory", action="add", target="user", text="Ann prefers terse replies."),
            _call(6, "memory", action="add", target="user", text="Ann prefers terse replies."),
        ],
    )
    assert results == [
        _ok(1, "Memory updated: added an entry to MEMORY.md (23 of 2,200 characters)"),
        _ok(2, "Memory updated: added an entry to MEMORY.md (43 of 2,200 characters)"),
        _ok(3, "Memory updated: replaced an entry of MEMORY.md (34 of 2,200 characters)"),
        _ok(4, "Memory updated: removed an entry from MEMORY.md (9 of 2,200 characters)"),
        _ok(5, "User profile updated: added an entry to USER.md (27 of 1,400 characters)"),
        _ok(6, "User profile unchanged: that entry is already in USER.md"),
    ]
    assert memory.path("memory").read_text(encoding="utf-8") == "Stg: s2.\n"
    assert memory.path("user").read_text(encoding="utf-8") == "Ann prefers terse replies.\n"


async def test_memory_tool_refusals_are_error_results_the_model_can_act_on(
    memory: MemoryStore,
) -> None:
    memory.add("memory", "The staging host is stg-1.")
    memory.add("memory", "The prod host is prd-1.")
    before = memory.path("memory").read_bytes()
    results = await _run(
        [memory_toolset(memory)],
        [
            _call(1, "memory", action="replace", target="memory", old_text="qa", text="x"),
            _call(2, "memory", action="remove", target="memory", old_text="host"),
            _call(3, "memory", action="add", target="memory"),
            _call(4, "memory", action="remove", target="memory"),
            _call(5, "memory", action="forget", target="memory", text="x"),
        ],
    )
    assert results == [
        _err(
            1,
            "tool memory: no entry of MEMORY.md contains 'qa'; quote "
            "text from one of the current entries (they may have changed since the session "
            "started):\n- The staging host is stg-1.\n- The prod host is prd-1.",
        ),
        _err(
            2,
            "tool memory: 'host' is in 2 entries of MEMORY.md; quote "
            "more of the one you mean:\n- The staging host is stg-1.\n- The prod host is prd-1.",
        ),
        _err(3, "tool memory: add needs text: the complete entry to store"),
        _err(
            4,
            "tool memory: remove needs old_text: a short part of the entry to change",
        ),
        _err(
            5,
            "tool memory: invalid arguments: action: Input should be 'add', 'replace' or 'remove'",
        ),
    ]
    assert memory.path("memory").read_bytes() == before
    assert len(memory.read_log()) == 2


async def test_memory_over_budget_returns_consolidation_message_and_file_is_unchanged(
    tmp_path: Path,
) -> None:
    store = MemoryStore(tmp_path, memory_budget=60, clock=FrozenClock())
    store.add("memory", "The deploy script is `make ship`; staging runs first.")
    files_before = _files(tmp_path)
    text = "Releases are cut on Tuesdays."
    results = await _run(
        [memory_toolset(store)], [_call(1, "memory", action="add", target="memory", text=text)]
    )
    assert results == [
        _err(
            1,
            "tool memory: MEMORY.md would be 86 of 60 characters; "
            "consolidate: replace or remove entries first (merge related ones, drop what is "
            "stale), then retry",
        )
    ]
    assert _files(tmp_path) == files_before  # the log too


async def test_provenance_records_carry_every_field_from_a_tool_context(
    memory: MemoryStore, skills: SkillStore
) -> None:
    def review(call: ToolUseBlock) -> ToolContext:
        return ToolContext(
            session_id="s-review",
            tool_use_id=call.id,
            run_id="run-7",
            metadata={
                "origin": BACKGROUND_REVIEW,
                "execution_context": "review_fork",
                "parent_session_id": "s-main",
                "platform": "telegram",
                "ignored": "x",
            },
        )

    await _run(
        [memory_toolset(memory), skills_toolset(skills)],
        [
            _call(1, "memory", action="add", target="user", text="Ann deploys on Fridays."),
            _call(2, "memory", action="replace", target="user", old_text="Fri", text="Ann: Mon."),
            _call(3, "skill_manage", action="create", name="ship", description="d", body="b"),
        ],
        context_factory=review,
    )
    memory.remove("user", "Ann")  # a direct API call has no tool context behind it

    def who(n: int) -> Provenance:
        return Provenance(
            origin=BACKGROUND_REVIEW,
            execution_context="review_fork",
            session_id="s-review",
            parent_session_id="s-main",
            platform="telegram",
            tool_use_id=f"toolu_{n}",
            run_id="run-7",
        )

    def user(action: str, provenance: Provenance, **texts: str) -> WriteRecord:
        return WriteRecord(
            timestamp=STAMP, target="user", action=action, provenance=provenance, **texts
        )

    assert memory.read_log() == [
        user("add", who(1), text="Ann deploys on Fridays."),
        user("replace", who(2), old_text="Ann deploys on Fridays.", new_text="Ann: Mon."),
        user("remove", Provenance(origin=DIRECT), old_text="Ann: Mon."),
    ]
    assert skills.read_log() == [
        WriteRecord(
            timestamp=STAMP,
            target="ship",
            action="create",
            text="---\nname: ship\ndescription: d\n---\n\nb\n",
            provenance=who(3),
        )
    ]
    # the log is flat JSON lines a user can read with jq
    first = json.loads(memory.log_path.read_text(encoding="utf-8").splitlines()[0])
    assert first == {
        "timestamp": STAMP,
        "target": "user",
        "action": "add",
        "text": "Ann deploys on Fridays.",
        "old_text": None,
        "new_text": None,
        "origin": "background_review",
        "execution_context": "review_fork",
        "session_id": "s-review",
        "parent_session_id": "s-main",
        "platform": "telegram",
        "tool_use_id": "toolu_1",
        "run_id": "run-7",
    }


def test_provenance_defaults_when_the_context_says_little() -> None:
    bare = ToolContext(session_id="s1", tool_use_id="toolu_1")
    assert Provenance.from_context(bare) == Provenance(
        origin="foreground",
        execution_context="unknown",
        session_id="s1",
        parent_session_id=None,
        platform="unknown",
        tool_use_id="toolu_1",
    )
    # what Session.tool_context sets today: the session kind stands in for the context
    session_like = ToolContext(
        session_id="s2", tool_use_id="t", metadata={"parent_session_id": None, "kind": "fork"}
    )
    assert Provenance.from_context(session_like).execution_context == "fork"


def test_read_log_skips_lines_that_do_not_parse(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore(tmp_path)
    store.add("memory", "kept")
    with store.log_path.open("a", encoding="utf-8") as fh:
        fh.write("{not json\n[1, 2]\n\n")
    store.add("memory", "also kept")
    assert [r.text for r in read_log(store.log_path)] == ["kept", "also kept"]
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 2
    assert read_log(tmp_path / "missing.jsonl") == []


async def test_skill_tools_create_view_update_delete(skills: SkillStore) -> None:
    tools = [skills_toolset(skills)]
    results = await _run(
        tools,
        [
            _call(
                1,
                "skill_manage",
                action="create",
                name="deploy-checklist",
                description="Checks before a production deploy",
                body="1. Staging first.\n2. Then prod.",
            ),
            _call(2, "skill_view", name="deploy-checklist"),
            _call(3, "skill_manage", action="update", name="deploy-checklist", body="1. Tag."),
            _call(4, "skill_view", name="deploy-checklist"),
            _call(5, "skill_manage", action="delete", name="deploy-checklist"),
            _call(6, "skill_view", name="deploy-checklist"),
            _call(7, "skill_manage", action="create", name="Deploy Checklist", description="d"),
            _call(8, "skill_manage", action="update", name="deploy-checklist", body="x"),
        ],
    )
    assert results == [
        _ok(1, "Skill 'deploy-checklist' created"),
        _ok(
            2,
            "Skill 'deploy-checklist': Checks before a production deploy\n\n"
            "1. Staging first.\n2. Then prod.",
        ),
        _ok(3, "Skill 'deploy-checklist' updated"),
        _ok(4, "Skill 'deploy-checklist': Checks before a production deploy\n\n1. Tag."),
        _ok(5, "Skill 'deploy-checklist' deleted"),
        _err(
            6,
            "tool skill_view: no skill named 'deploy-checklist'; the skills are: (none yet)",
        ),
        _err(
            7,
            "tool skill_manage: invalid skill name 'Deploy Checklist': "
            "use 1 to 64 characters among lowercase letters, digits and '-', starting with a "
            "letter or digit (e.g. 'deploy-checklist')",
        ),
        _err(
            8,
            "tool skill_manage: no skill named 'deploy-checklist'; the skills are: (none yet)",
        ),
    ]
    assert [r.action for r in skills.read_log()] == ["create", "update", "delete"]


async def test_a_review_policy_lets_memory_and_skill_tools_run(
    memory: MemoryStore, skills: SkillStore
) -> None:
    policy = DispatchPolicy(
        allowed=frozenset({"memory", "skill_view", "skill_manage"}), deny_risky=True
    )
    results = await _run(
        [memory_toolset(memory), skills_toolset(skills)],
        [
            _call(1, "memory", action="add", target="memory", text="x"),
            _call(2, "skill_manage", action="create", name="a", description="d", body="b"),
        ],
        policy=policy,
    )
    assert [r.is_error for r in results] == [False, False]
