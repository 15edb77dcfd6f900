"""`stoker bench compaction` on a shorter session: it compacts, the idle-aware policy
writes no more than the fixed threshold, and both cost far less than no cache."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stoker.cli.app import app


def test_the_compaction_bench_compacts_and_idle_awareness_writes_no_more() -> None:
    out = CliRunner().invoke(
        app, ["bench", "compaction", "--turns", "70", "--window", "12000", "--json"]
    )
    assert out.exit_code == 0, out.output
    figures = json.loads(out.output)
    aware, fixed = figures["idle_aware"], figures["fixed_threshold"]
    assert aware["compactions"] >= 2
    assert fixed["compactions"] >= 2
    assert aware["largest_request"] < 12_000 * 0.8 + 500  # never past the threshold by much
    assert aware["written"] <= fixed["written"]
    assert aware["vs_no_cache"] < 0.3
    assert figures["aware_vs_fixed"] == round(aware["cost_usd"] / fixed["cost_usd"], 4)
