"""`stoker bench cache --workload foresight`: the time policy held to perfect foresight on
the hard and extended workloads (their records), on users whose returns follow seeded
mixtures, and on fuzzed gap sequences."""

from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from stoker.bench.cache import hard
from stoker.bench.returns import (
    KINDS,
    MIXTURES,
    fuzz_sequences,
    gaps_of,
    run_foresight,
)
from stoker.cache.hindsight import hindsight, record_units
from stoker.cache.models import model_info
from stoker.cli.app import app


def test_return_times_are_seeded_and_each_within_a_kind() -> None:
    for mixture in MIXTURES.values():
        one = gaps_of(mixture, 200, random.Random(7))
        assert one == gaps_of(mixture, 200, random.Random(7))
        assert one != gaps_of(mixture, 200, random.Random(8))
        assert all(any(KINDS[k][0] <= g <= KINDS[k][1] * (1 + 1e-9) for k in mixture) for g in one)
    assert fuzz_sequences(30, seed=1) == fuzz_sequences(30, seed=1)


async def test_the_hard_workload_seen_with_hindsight(tmp_path: Path) -> None:
    """Its one idle gap (6 minutes) is found, what was paid is what the records cost,
    and foresight pays no more, across the gap and in total."""
    figures = await hard(tmp_path)
    seen = hindsight(figures.records)
    assert seen is not None
    assert [round(g.gap.seconds) for g in seen.gaps if g.done or g.best.moves] == [360]
    info = model_info(figures.records[0].model)
    assert seen.paid == sum(record_units(r, info) for r in figures.records)
    assert all(g.best.cost <= g.paid + 1e-6 for g in seen.gaps)
    assert seen.foresight <= seen.paid
    gap = next(g for g in seen.gaps if g.done)
    assert gap.done == ("seal",)
    assert gap.kept


async def test_foresight_is_never_above_the_policy(tmp_path: Path) -> None:
    figures = [await hard(tmp_path)]
    rows, worst = run_foresight(figures, fuzz=10)
    names = [r.name for r in rows]
    assert names[0] == "hard"
    assert sum(n.startswith("mix ") for n in names) >= 3
    for row in (*rows, worst):
        assert row.best <= row.paid + 1e-6, row
        assert row.ratio >= 1.0 - 1e-9
    assert worst.worst  # the worst sequence's gaps, to print


def test_the_cli_prints_policy_over_foresight_as_json() -> None:
    result = CliRunner().invoke(
        app, ["bench", "cache", "--workload", "foresight", "--fuzz", "5", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["foresight"]
    names = [w["workload"] for w in data["workloads"]]
    assert names[:2] == ["hard", "extended"]
    assert len(names) >= 5
    assert data["fuzz_worst"]["seconds"]
    assert "workloads" not in json.loads(result.output)  # hard and extended ran only for this
