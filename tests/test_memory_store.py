"""MemoryStore: the files as a human reads them, the budget, atomic and concurrent writes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import platformdirs
import pytest

from stoker.agent.system_prompt import build_system_prompt
from stoker.clock import FrozenClock
from stoker.config import Config
from stoker.memory import (
    DELIMITER,
    AmbiguousEntry,
    BudgetExceeded,
    EntryNotFound,
    InvalidEntry,
    MemoryStore,
    MemoryStoreError,
    MemoryWrite,
    SkillStore,
    memory_section,
    skills_section,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "memory", clock=FrozenClock())


def _bytes(store: MemoryStore) -> dict[str, bytes]:
    """Every file of the store's directory, by name (the lock file excluded)."""
    return {p.name: p.read_bytes() for p in sorted(store.directory.iterdir()) if p.name != ".lock"}


def test_add_replace_remove_round_trip(store: MemoryStore) -> None:
    assert store.add("memory", "  Deploy with `make ship`.  \n") == MemoryWrite(
        target="memory", action="add", file="MEMORY.md", size=25, budget=2_200
    )
    store.add("memory", "Tests need PYTHONHASHSEED=0.")
    store.add("user", "Prefers short answers.")
    assert store.path("memory").read_text(encoding="utf-8") == (
        "Deploy with `make ship`.\n§\nTests need PYTHONHASHSEED=0.\n"
    )

    store.replace("memory", "HASHSEED", "Tests pin PYTHONHASHSEED=0 (set-order fixture).")
    assert store.path("memory").read_text(encoding="utf-8") == (
        "Deploy with `make ship`.\n§\nTests pin PYTHONHASHSEED=0 (set-order fixture).\n"
    )

    write = store.remove("memory", "make ship")
    assert store.path("memory").read_text(encoding="utf-8") == (
        "Tests pin PYTHONHASHSEED=0 (set-order fixture).\n"
    )
    assert write.size == len(store.path("memory").read_text(encoding="utf-8"))
    assert store.entries("user") == ("Prefers short answers.",)
    assert store.path("user").read_text(encoding="utf-8") == "Prefers short answers.\n"

    store.remove("memory", "PYTHONHASHSEED")
    assert store.path("memory").read_bytes() == b""
    assert store.entries("memory") == ()


def test_multi_line_entries_round_trip_through_the_delimiter(store: MemoryStore) -> None:
    first = "Release steps:\n\n1. bump the version\n2. `make ship`"
    second = "    indented code keeps its indent\n  and so does this line"
    store.add("memory", first)
    store.add("memory", second)
    text = store.path("memory").read_text(encoding="utf-8")
    assert text == f"{first}\n{DELIMITER}\n{second.strip()}\n"
    assert store.entries("memory") == (first, second.strip())


def test_hand_edited_file_is_read_leniently_and_rewritten_canonically(
    store: MemoryStore,
) -> None:
    store.directory.mkdir(parents=True)
    store.path("memory").write_bytes(
        "\ufeffone  \r\n\r\n  §  \r\n\r\n two\r\nlines\r\n§\r\n§\r\nthree § inline\r\n".encode()
    )
    assert store.entries("memory") == ("one", "two\nlines", "three § inline")
    store.add("memory", "four")
    assert store.path("memory").read_text(encoding="utf-8") == (
        "one\n§\ntwo\nlines\n§\nthree § inline\n§\nfour\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   \n ", "text is empty; give the entry's text (to delete one, use remove)"),
        (
            "a\n  §\nb",
            "text has a line holding only '§', the entry delimiter; add separate entries instead",
        ),
    ],
)
def test_an_entry_that_cannot_be_stored_is_refused(
    store: MemoryStore, text: str, message: str
) -> None:
    store.add("memory", "keep me")
    before = _bytes(store)
    with pytest.raises(InvalidEntry) as caught:
        store.add("memory", text)
    assert str(caught.value) == message
    assert _bytes(store) == before


def test_old_text_must_match_exactly_one_entry(store: MemoryStore) -> None:
    store.add("memory", "The staging host is stg-1.")
    store.add("memory", "The prod host is prd-1.")
    before = _bytes(store)
    with pytest.raises(EntryNotFound) as missing:
        store.replace("memory", "qa host", "The qa host is qa-1.")
    assert str(missing.value) == (
        "no entry of MEMORY.md contains 'qa host'; quote text from one of the current "
        "entries (they may have changed since the session started):\n"
        "- The staging host is stg-1.\n- The prod host is prd-1."
    )
    with pytest.raises(AmbiguousEntry) as ambiguous:
        store.remove("memory", "host is")
    assert str(ambiguous.value) == (
        "'host is' is in 2 entries of MEMORY.md; quote more of the one you mean:\n"
        "- The staging host is stg-1.\n- The prod host is prd-1."
    )
    with pytest.raises(EntryNotFound, match=r"\(USER\.md has no entries\)"):
        store.remove("user", "anything")
    with pytest.raises(MemoryStoreError, match="unknown memory target 'notes'"):
        store.add("notes", "x")  # type: ignore[arg-type]
    assert _bytes(store) == before


def test_adding_an_entry_that_is_already_there_changes_nothing(store: MemoryStore) -> None:
    store.add("memory", "once")
    before = _bytes(store)
    write = store.add("memory", " once \n")
    assert write == MemoryWrite(
        target="memory", action="add", file="MEMORY.md", size=5, budget=2_200, changed=False
    )
    assert _bytes(store) == before


def test_store_over_budget_raises_and_writes_nothing(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, memory_budget=30, user_budget=10)
    store.add("memory", "a" * 20)
    before = _bytes(store)
    with pytest.raises(BudgetExceeded) as caught:
        store.add("memory", "b" * 10)
    assert str(caught.value) == (
        "MEMORY.md would be 34 of 30 characters; consolidate: replace or remove entries "
        "first (merge related ones, drop what is stale), then retry"
    )
    assert (caught.value.file, caught.value.size, caught.value.budget) == ("MEMORY.md", 34, 30)
    with pytest.raises(BudgetExceeded, match=r"USER\.md would be 12 of 10 characters"):
        store.add("user", "x" * 11)
    assert _bytes(store) == before


def test_a_file_over_budget_can_still_shrink(tmp_path: Path) -> None:
    big = MemoryStore(tmp_path)
    big.add("memory", "a" * 50)
    big.add("memory", "b" * 50)
    small = MemoryStore(tmp_path, memory_budget=60)
    with pytest.raises(BudgetExceeded):
        small.replace("memory", "aaa", "c" * 60)
    small.replace("memory", "aaa", "c" * 20)  # 74 characters: still over, but smaller
    small.remove("memory", "bbb")
    assert small.path("memory").read_text(encoding="utf-8") == "c" * 20 + "\n"


def test_budgets_must_be_positive(tmp_path: Path) -> None:
    from stoker.errors import ConfigError

    with pytest.raises(ConfigError, match="memory_budget must be a positive number"):
        MemoryStore(tmp_path, memory_budget=0)


def test_directories_follow_the_settings_home_else_the_user_data_dir(tmp_path: Path) -> None:
    assert MemoryStore(tmp_path / "x").directory == tmp_path / "x"
    config = Config.from_env({"STOKER_HOME": str(tmp_path / "home")})
    assert MemoryStore(config.memory_dir).directory == tmp_path / "home" / "memory"
    assert SkillStore(config.skills_dir).directory == tmp_path / "home" / "skills"
    default = Config.from_env({})
    assert MemoryStore(default.memory_dir).directory == (
        Path(platformdirs.user_data_dir("stoker")) / "memory"
    )
    assert list(tmp_path.iterdir()) == []  # nothing is created until the first write


def test_writes_leave_no_temp_files(store: MemoryStore) -> None:
    for i in range(5):
        store.add("memory", f"entry {i}")
    store.replace("memory", "entry 3", "entry three")
    store.remove("memory", "entry 0")
    store.add("user", "a user fact")
    names = sorted(p.name for p in store.directory.iterdir())
    assert names == [".lock", "MEMORY.md", "USER.md", "memory.log.jsonl"]


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temp_file(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add("memory", "old")
    before = _bytes(store)

    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        store.add("memory", "new")
    assert _bytes(store) == before
    assert sorted(p.name for p in store.directory.iterdir()) == [
        ".lock",
        "MEMORY.md",
        "memory.log.jsonl",
    ]


def test_threads_of_one_process_adding_at_once_lose_no_entry(tmp_path: Path) -> None:
    # Tools run in worker threads: the lock must exclude threads too, not only processes.
    store = MemoryStore(tmp_path, memory_budget=100_000)
    start = threading.Barrier(4)

    def work(worker: int) -> None:
        start.wait()
        for i in range(10):
            store.add("memory", f"thread {worker} entry {i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = sorted(f"thread {w} entry {i}" for w in range(4) for i in range(10))
    assert sorted(store.entries("memory")) == expected


_WORKER = """
import pathlib, sys, time
from stoker.memory import MemoryStore

directory, worker, signals = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
store = MemoryStore(directory, memory_budget=100_000)
(signals / f"ready-{worker}").touch()
while not (signals / "go").exists():
    time.sleep(0.001)
for i in range(25):
    store.add("memory", f"worker {worker} entry {i}")
"""


def test_two_processes_adding_memory_at_once_lose_no_entry(tmp_path: Path) -> None:
    directory = tmp_path / "memory"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(directory), name, str(tmp_path)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        deadline = time.monotonic() + 20
        while not all((tmp_path / f"ready-{n}").exists() for n in ("a", "b")):
            assert time.monotonic() < deadline, "workers did not start"
            assert all(p.poll() is None for p in procs), [p.communicate()[1] for p in procs]
            time.sleep(0.005)
        (tmp_path / "go").touch()  # both start adding at the same moment
        errors = [p.communicate(timeout=30)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], errors
    store = MemoryStore(directory, memory_budget=100_000)
    expected = {f"worker {w} entry {i}" for w in "ab" for i in range(25)}
    assert sorted(store.entries("memory")) == sorted(expected)
    assert len(store.read_log()) == 50
    for worker in "ab":  # each worker's own entries stay in its order
        mine = [e for e in store.entries("memory") if e.startswith(f"worker {worker}")]
        assert mine == [f"worker {worker} entry {i}" for i in range(25)]


def test_snapshot_frozen_in_a_built_prompt_is_unchanged_after_a_write(tmp_path: Path) -> None:
    memory = MemoryStore(tmp_path / "memory")
    skills = SkillStore(tmp_path / "skills")
    assert memory_section(memory) == ""
    assert skills_section(skills) == ""
    memory.add("memory", "Deploy with `make ship`.")
    memory.add("user", "Ann, a release engineer.")
    skills.create("deploy-checklist", "Checks before a production deploy", "1. Staging first.")
    clock = FrozenClock()
    sections = (memory_section(memory), skills_section(skills))
    assert [type(s) for s in sections] == [str, str]  # values, not views of the files
    system = build_system_prompt("Base.", clock=clock, sections=sections)
    expected = (
        "Base.\n\n"
        "# Memory\n"
        "Saved with the memory tool and frozen when this session started: edits apply to the "
        "files at once and appear here from the next session. Entries are separated by lines "
        "holding only §.\n\n"
        "## MEMORY.md: what you learned (25 of 2,200 characters)\n"
        "Deploy with `make ship`.\n\n"
        "## USER.md: about the user (25 of 1,400 characters)\n"
        "Ann, a release engineer.\n\n"
        "# Skills\n"
        "Procedures saved in earlier sessions, one per line as name: description. Before "
        "following one, load it with skill_view; create or fix them with skill_manage.\n"
        "deploy-checklist: Checks before a production deploy\n\n"
        "Today's date: 2026-09-21."
    )
    assert system == expected

    memory.add("memory", "Staging host is stg-1.")
    skills.create("rollback", "Undo a bad deploy", "1. `make rollback`.")

    assert system == expected  # the session's prompt keeps what it froze
    assert memory.entries("memory")[-1] == "Staging host is stg-1."  # tools see it at once
    later = build_system_prompt(
        "Base.", clock=clock, sections=(memory_section(memory), skills_section(skills))
    )
    assert "Staging host is stg-1." in later  # a new session sees it
    assert "rollback: Undo a bad deploy" in later
