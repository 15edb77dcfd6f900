"""The shared toolkit cache, the registry's views of it, and the notes about changes.

Fetches are counted twice: by the cache (`fetch_count`) and by the fake toolkit
itself (`lists`), so a cache that lied about its count would not pass.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from stoker.clock import FrozenClock
from stoker.integrations import (
    IntegrationContext,
    ToolkitCache,
    ToolkitRegistry,
    ToolkitUnavailable,
    ToolkitView,
    ToolSpec,
    describe_change,
)

CTX = IntegrationContext(session_id="s1")


def spec(name: str, **properties: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"{name} things",
        input_schema={"type": "object", "properties": properties},
    )


class CountingToolkit:
    """A toolkit whose listing is counted, and can be held open or made to fail."""

    def __init__(self, name: str, tools: list[ToolSpec], *, gate: asyncio.Event | None = None):
        self.name = name
        self.tools = tools
        self.gate = gate
        self.error: Exception | None = None
        self.lists = 0

    async def list_tools(self, context: IntegrationContext) -> tuple[ToolSpec, ...]:
        self.lists += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        return tuple(self.tools)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: IntegrationContext
    ) -> str:
        return f"{self.name}.{name}"

    async def close(self) -> None:
        pass


def github() -> CountingToolkit:
    return CountingToolkit("github", [spec("list_prs"), spec("create_issue", title={})])


def jira() -> CountingToolkit:
    return CountingToolkit("jira", [spec("search")])


def _assert_both_fetched_once(
    view: ToolkitView, cache: ToolkitCache, gh: CountingToolkit, jr: CountingToolkit
) -> None:
    """`view` holds both toolkits, with authority, and each was fetched once in all: by
    the cache's count and by the toolkit's own."""
    assert view.authoritative
    assert view.names == ("github", "jira")
    assert (dict(cache.fetch_counts), gh.lists, jr.lists) == ({"github": 1, "jira": 1}, 1, 1)


async def test_prewarm_with_a_warm_cache_is_authoritative_and_turn_one_fetches_nothing() -> None:
    cache = ToolkitCache(clock=FrozenClock())
    gh, jr = github(), jira()
    await ToolkitRegistry([gh, jr]).view(cache, CTX)  # an earlier session warmed the cache
    registry = ToolkitRegistry([gh, jr])

    prewarmed = registry.prewarm(cache)
    turn_one = await registry.view(cache, CTX)

    assert turn_one == prewarmed
    _assert_both_fetched_once(prewarmed, cache, gh, jr)


async def test_cold_cache_prewarm_is_not_authoritative_and_view_fetches_once_each() -> None:
    cache = ToolkitCache(clock=FrozenClock())
    gh, jr = github(), jira()
    registry = ToolkitRegistry([gh, jr])

    prewarmed = registry.prewarm(cache)
    assert (prewarmed.authoritative, prewarmed.names, prewarmed.missing) == (
        False,
        (),
        ("github", "jira"),
    )
    assert cache.fetch_counts == {}

    first = await registry.view(cache, CTX)
    second = await registry.view(cache, CTX)

    assert second == first
    _assert_both_fetched_once(first, cache, gh, jr)


async def test_concurrent_gets_share_one_fetch() -> None:
    cache = ToolkitCache(clock=FrozenClock())
    gate = asyncio.Event()
    gh = CountingToolkit("github", [spec("list_prs")], gate=gate)

    tasks = [asyncio.create_task(cache.get(gh, CTX)) for _ in range(3)]
    await asyncio.sleep(0)  # every caller is now waiting on the fetch
    assert cache.peek("github") is None
    gate.set()
    snapshots = await asyncio.gather(*tasks)

    assert snapshots[0] is snapshots[1] is snapshots[2]
    assert (cache.fetch_count("github"), gh.lists) == (1, 1)


async def test_a_cancelled_caller_does_not_cancel_the_shared_fetch() -> None:
    cache = ToolkitCache(clock=FrozenClock())
    gate = asyncio.Event()
    gh = CountingToolkit("github", [spec("list_prs")], gate=gate)
    first = asyncio.create_task(cache.get(gh, CTX))
    second = asyncio.create_task(cache.get(gh, CTX))
    await asyncio.sleep(0)

    first.cancel()
    gate.set()
    snapshot = await second

    assert first.cancelled()
    assert snapshot.names == ("list_prs",)
    assert cache.peek("github") is snapshot
    assert gh.lists == 1


async def test_an_expired_snapshot_is_refetched() -> None:
    clock = FrozenClock()
    cache = ToolkitCache(ttl=300.0, clock=clock)
    gh = github()
    first = await cache.get(gh, CTX)

    clock.advance(299.0)
    assert cache.peek("github") is first
    assert await cache.get(gh, CTX) is first
    clock.advance(2.0)
    assert cache.peek("github") is None  # peek returns fresh snapshots only
    assert ToolkitRegistry([gh]).prewarm(cache).authoritative is False
    again = await cache.get(gh, CTX)

    assert (cache.fetch_count("github"), gh.lists) == (2, 2)
    assert again.digest == first.digest
    assert again.fetched_at == first.fetched_at + 301.0


async def test_invalidate_refetches_and_a_fetch_started_before_it_is_not_stored() -> None:
    cache = ToolkitCache(clock=FrozenClock())
    gate = asyncio.Event()
    gh = CountingToolkit("github", [spec("old")], gate=gate)
    stale = asyncio.create_task(cache.get(gh, CTX))
    await asyncio.sleep(0)

    cache.invalidate("github")
    gate.set()
    assert (await stale).names == ("old",)  # its caller still gets an answer
    assert cache.peek("github") is None

    gh.tools = [spec("new")]
    assert (await cache.get(gh, CTX)).names == ("new",)
    assert cache.fetch_count("github") == 2


async def test_a_failed_fetch_leaves_the_toolkit_missing_and_is_not_retried_at_once() -> None:
    clock = FrozenClock()
    cache = ToolkitCache(failure_ttl=30.0, clock=clock)
    gh, jr = github(), jira()
    jr.error = ConnectionError("jira is down")
    registry = ToolkitRegistry([gh, jr])

    first = await registry.view(cache, CTX)
    second = await registry.view(cache, CTX)
    with pytest.raises(ToolkitUnavailable, match="jira is down"):
        await cache.get(jr, CTX)
    clock.advance(31.0)
    jr.error = None
    third = await registry.view(cache, CTX)

    assert (first.names, first.missing, first.authoritative) == (("github",), ("jira",), False)
    assert second == first
    assert jr.lists == 2  # once failing, once after failure_ttl
    assert third.authoritative
    assert describe_change(first, third) == "Toolkit 'jira' connected: 1 tool (search)."


async def test_view_fingerprint_changes_when_a_toolkit_connects_and_the_note_is_exact() -> None:
    cache = ToolkitCache(clock=FrozenClock())
    registry = ToolkitRegistry([jira()])
    before = await registry.view(cache, CTX)

    registry.register(github())
    after = await registry.view(cache, CTX)
    registry.unregister("jira")
    gone = await registry.view(cache, CTX)

    assert after.fingerprint != before.fingerprint
    assert (before.generation, after.generation, gone.generation) == (1, 2, 3)
    assert describe_change(before, after) == (
        "Toolkit 'github' connected: 2 tools (create_issue, list_prs)."
    )
    assert describe_change(after, gone) == "Toolkit 'jira' disconnected."
    assert describe_change(before, gone) == (
        "Toolkit 'github' connected: 2 tools (create_issue, list_prs). Toolkit 'jira' disconnected."
    )
    assert describe_change(after, after) == ""


def test_describe_change_names_added_removed_and_updated_tools() -> None:
    old = ToolkitView(toolkits={"fs": [spec("read", path={}), spec("stat"), spec("rm")]})
    new = ToolkitView(
        toolkits={"fs": [spec("read", path={"type": "string"}), spec("stat"), spec("write")]},
        missing=("web",),
    )
    many = ToolkitView(toolkits={"big": [spec(f"t{i:02}") for i in range(12)]})
    unavailable = ToolkitView(missing=("fs",))

    assert (
        describe_change(old, new) == "Toolkit 'fs' changed: added write; removed rm; updated read."
    )
    assert describe_change(ToolkitView(), many) == (
        "Toolkit 'big' connected: 12 tools "
        "(t00, t01, t02, t03, t04, t05, t06, t07, t08, t09 and 2 more)."
    )
    assert describe_change(new, unavailable) == "Toolkit 'fs' is unavailable for now."


def test_view_bytes_ignore_listing_order_and_schema_key_order() -> None:
    a = ToolSpec(
        name="a",
        input_schema={"type": "object", "properties": {"x": {"type": "string", "minLength": 1}}},
    )
    a_reordered = ToolSpec(
        name="a",
        input_schema={"properties": {"x": {"minLength": 1, "type": "string"}}, "type": "object"},
    )
    b = spec("b")

    one = ToolkitView(toolkits={"k": [a, b], "j": [b]})
    two = ToolkitView(toolkits={"j": [b], "k": [b, a_reordered]})

    assert one.view_bytes() == two.view_bytes()
    assert one.fingerprint == two.fingerprint
    assert one.view_bytes().startswith(b'{"j":[{"description":"b things","input_schema":')
    assert list(a_reordered.input_schema) == ["properties", "type"]
    assert one.fingerprint != ToolkitView(toolkits={"k": [a, b]}).fingerprint
