"""The fleet workload: fresh sessions of one agent read the shared prefix on every wire
when keys are content-addressed and sharded (docs/benchmarks.md's figures come from
`stoker bench cache --workload fleet`; this runs a smaller fleet at the highest rate)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stoker.bench.fleet import WIRES, fleet_run, measure_shared
from stoker.cli.app import app


async def test_sharded_keys_read_the_shared_prefix_where_one_key_overflows() -> None:
    model = WIRES["openai gpt-5 (L)"]
    shared = await measure_shared(model)
    assert shared > 3000  # the tools and the system prompt: 3,456 o200k_base tokens
    per_session = await fleet_run(model, 60, "per session", 40, shared)
    one_key = await fleet_run(model, 60, "one key", 40, shared)
    sharded = await fleet_run(model, 60, "sharded", 40, shared)
    assert per_session.first_calls_full == 0.0  # every fresh session cold
    assert per_session.keys == 40
    assert one_key.overflows > 5  # 80 requests a minute on one key
    assert one_key.first_calls_full < 0.7
    # A sharded fleet's first calls miss only on a shard's first use (or an overflow
    # while the shard count catches up with a rising rate).
    assert sharded.overflows <= 1
    assert 2 <= sharded.keys <= 8
    cold = sharded.keys - 1 + sharded.overflows  # the first session's shard is not counted
    assert sharded.first_calls_full >= 1 - cold / 39
    assert sharded.cost_ratio < min(one_key.cost_ratio, per_session.cost_ratio) / 2


async def test_one_key_is_enough_where_the_provider_routes_by_itself() -> None:
    for wire in ("anthropic", "openai gpt-5.6 (N)"):
        model = WIRES[wire]
        figures = await fleet_run(model, 60, "sharded", 20, await measure_shared(model))
        assert figures.first_calls_full == 1.0
        assert figures.keys == 1
        assert figures.overflows == 0


def test_the_cli_reports_the_fleet_as_json() -> None:
    result = CliRunner().invoke(
        app, ["bench", "cache", "--workload", "fleet", "--sessions", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = data["fleet"]
    assert {r["mode"] for r in rows} == {"per session", "one key", "sharded"}
    assert {r["rate_per_minute"] for r in rows} == {1, 10, 60}
    slow = data["fleet_arrivals"]
    assert {(r["interval_minutes"], r["fleet_aware"]) for r in slow} == {
        (i, aware) for i in (2.0, 8.0, 20.0) for aware in (False, True)
    }
    stored = {(r["every_minutes"], r["sharing"]): r for r in data["fleet_storage"]}
    assert set(stored) == {(m, s) for m in (2.0, 10.0, 30.0) for s in ("per session", "per agent")}
    assert stored[(2.0, "per agent")]["caches_created"] == 1  # one cache per agent
    assert stored[(2.0, "per session")]["caches_created"] == 3  # one per session
    per_agent = stored[(2.0, "per agent")]["storage_token_hours_per_session"]
    assert per_agent < stored[(2.0, "per session")]["storage_token_hours_per_session"]
