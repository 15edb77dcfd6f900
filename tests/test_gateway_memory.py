"""Each gateway user's own memory (`[memory]`): the `memory` tool writes to the user's
files, a background review saves what to keep, and each new session of that user (only
theirs) starts with it frozen in its prefix, which every rebuild of the session keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.agent.review import ReviewConfig
from stoker.errors import ConfigError
from stoker.gateway.config import load_config
from stoker.gateway.memory import user_directory
from stoker.gateway.server import build_gateway
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from tests.test_gateway_support import Rig, make_rig
from tests.test_review import ReviewingModel

ALICE, BOB = "alice", "bob"
SAVED = "likes tea"  # what ReviewingModel's review saves about the user


def _rig(store: SqlEventStore, root: Path, every: int = 1) -> Rig:
    rig = make_rig(store, memory_dir=root, review=ReviewConfig(memory_every=every))
    rig.provider = SimProvider(engine=SimEngine(model=ReviewingModel()), clock=rig.clock)
    return rig


async def _turn(rig: Rig, user: str, sid: str, text: str) -> None:
    await rig.gateway.send(user, sid, text)
    entry = rig.gateway.agents.peek(sid)
    assert entry is not None
    await entry.session.drain()  # the background review, if one was due


async def test_a_review_saves_to_the_users_memory_and_only_their_next_session_reads_it(
    store: SqlEventStore, tmp_path: Path
) -> None:
    rig = _rig(store, tmp_path / "memory")
    first = await rig.gateway.create_session(ALICE)
    await _turn(rig, ALICE, first, "hello")
    alice = user_directory(tmp_path / "memory", ALICE)
    assert SAVED in (alice / "USER.md").read_text(encoding="utf-8")
    assert not user_directory(tmp_path / "memory", BOB).exists()
    assert SAVED not in (await store.load(first)).prefix.system  # its prefix never moves
    second, bobs = await rig.gateway.create_session(ALICE), await rig.gateway.create_session(BOB)
    assert SAVED in (await store.load(second)).prefix.system
    assert SAVED not in (await store.load(bobs)).prefix.system
    # one tool spec for everyone: only the files it writes differ
    assert (await store.load(second)).prefix.tools == (await store.load(bobs)).prefix.tools
    assert "memory" in (await store.load(bobs)).prefix.tool_names


async def test_a_rebuilt_session_keeps_the_memory_it_was_created_with(
    store: SqlEventStore, tmp_path: Path
) -> None:
    rig = _rig(store, tmp_path / "memory")
    seed = await rig.gateway.create_session(ALICE)
    await _turn(rig, ALICE, seed, "hello")  # alice's memory now says she likes tea
    sid = await rig.gateway.create_session(ALICE)
    await _turn(rig, ALICE, sid, "one")
    (user_directory(tmp_path / "memory", ALICE) / "USER.md").write_text(
        "- likes coffee now\n", encoding="utf-8"
    )
    rig.gateway.agents.evict(sid, "test: rebuilt from the store")
    await _turn(rig, ALICE, sid, "two")
    stored = await store.load(sid)
    assert SAVED in stored.prefix.system
    assert "coffee" not in stored.prefix.system
    view = await rig.gateway.view(ALICE, sid)
    before, after = view.turns[0].records[-1], view.turns[1].records[0]
    assert after.explanation.verdict == "hit"  # the rebuild sent the same prefix:
    assert after.usage.read >= before.usage.read + before.usage.written > 0  # all of it read


def test_a_users_directory_is_theirs_and_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    names = ["../../etc", "telegram:42", "telegram/42", "", ".", "é" * 100]
    dirs = [user_directory(root, n) for n in names]
    assert len(set(dirs)) == len(names)  # ids that read alike still get their own
    for d in dirs:
        assert d.parent == root
        assert d.resolve().is_relative_to(root.resolve())
    assert user_directory(root, "telegram:42").name.startswith("telegram_42-")


def test_the_memory_section_turns_memory_and_reviews_on(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('[memory]\ndirectory = "mem"\n', encoding="utf-8")
    config = load_config(path, env={})
    assert config.memory_dir == tmp_path / "mem"
    assert config.review == ReviewConfig(memory_every=5)
    path.write_text('[memory]\ndirectory = "mem"\nreview_every = 0\n', encoding="utf-8")
    assert load_config(path, env={}).review is None  # the tool still, no reviews
    assert load_config(None, env={}).memory_dir is None  # off unless configured
    path.write_text("[memory]\nreview_every = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"memory\.directory"):
        load_config(path, env={})


async def test_serve_builds_the_gateway_with_each_users_memory(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('[memory]\ndirectory = "mem"\nreview_every = 2\n', encoding="utf-8")
    config = load_config(path, env={})
    store = SQLiteStore(tmp_path / "sessions.db")
    rig = make_rig(store)
    gateway = build_gateway(config, store=store, provider_factory=rig.factory)
    try:
        assert gateway.pool.review == ReviewConfig(memory_every=2)
        sid = await gateway.create_session(ALICE)
        assert "memory" in (await store.load(sid)).prefix.tool_names
        assert gateway.pool.memory is not None
        assert gateway.pool.memory.root == tmp_path / "mem"
    finally:
        await store.close()
