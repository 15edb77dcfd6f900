"""`stoker bench cache --workload providers`: the hard workload on every provider, each
held to its own floor (the ideal's cost), one row per provider (in `--json` too)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from stoker.bench.providers import PROVIDER_RUNS, over_floor, run_providers_bench, to_dict
from stoker.cli.app import app

MINE = ("anthropic", "openai", "bedrock", "openrouter", "deepseek", "vllm", "llamacpp")


def test_every_provider_has_a_run() -> None:
    assert set(MINE) <= set(PROVIDER_RUNS)


@pytest.mark.parametrize("name", MINE)
async def test_the_hard_workload_is_within_five_percent_of_the_floor(name: str) -> None:
    (figures,) = await run_providers_bench((name,))
    assert figures.name == name
    assert over_floor(figures) < 0.05
    assert figures.total.undeclared == 0
    row = to_dict(figures)
    assert row["provider"] == name
    assert row["cost_vs_no_cache"] < 0.35


@pytest.mark.slow  # every provider's workload, from the command
def test_the_cli_prints_one_row_per_provider_in_json() -> None:
    result = CliRunner().invoke(app, ["bench", "cache", "--workload", "providers", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["providers"]
    assert [r["provider"] for r in rows] == list(PROVIDER_RUNS)
    assert all({"cost_vs_no_cache", "floor_vs_no_cache", "writes_vs_ideal"} <= set(r) for r in rows)
