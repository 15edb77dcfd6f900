"""Suite-wide invariant: no test makes an undeclared cache break.

Every provider call made during a test is checked; a test that moves the prefix on
purpose carries `@pytest.mark.breaks_cache(reason=...)`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stoker.cache.fleet import process_fleet
from stoker.cache.keys import process_key_shards
from stoker.testing import assert_no_undeclared_breaks, observe_records
from stoker.wire.record import CacheRecord


@pytest.fixture(autouse=True)
def own_stoker_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every test has a Stoker home of its own, as if no other test had ever run: the CLI
    reads STOKER_HOME (and children it starts inherit it), and a `Config` resolved from no
    environment falls back to the user data dir, which platformdirs finds under
    XDG_DATA_HOME. Nothing a test writes there (the simulator's cache file, a default
    database, memory) reaches another test, or the home of whoever runs the suite."""
    root = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("STOKER_HOME", str(root / "stoker"))
    monkeypatch.setenv("XDG_DATA_HOME", str(root / "data"))


@pytest.fixture(autouse=True)
def fresh_process_watches() -> None:
    """What the process has seen of other sessions (request rates per shared prefix, new
    sessions' arrivals) starts empty in every test, as in a new process: tests run on
    frozen clocks whose times overlap, and one test's traffic must not shape another's."""
    process_key_shards().clear()
    process_fleet().clear()


@pytest.fixture(autouse=True)
def recorded_calls(request: pytest.FixtureRequest) -> Iterator[list[CacheRecord]]:
    records: list[CacheRecord] = []
    with observe_records(records.append):
        yield records
    marker = request.node.get_closest_marker("breaks_cache")
    if marker is not None:
        if not marker.kwargs.get("reason"):
            pytest.fail(
                "@pytest.mark.breaks_cache needs reason=... saying why the break is expected"
            )
        return
    assert_no_undeclared_breaks(records)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the tests marked slow start first (every worker sorts the same way):
    the long jobs begin early and the short ones fill in around them, instead of one
    worker finishing a long test alone while the other waits."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


pytest_plugins = ["tests.store_fixtures", "tests.faulty_upstream", "tests.sim_routes"]
