"""The hard workload on Gemini (`stoker bench cache --workload providers`): the implicit
cache with pings across the gap, and explicit caches with their storage spend set against
the reads they bought."""

from __future__ import annotations

import re

from stoker.bench.providers import PROVIDER_RUNS, over_floor, run_providers_bench, to_dict


def test_both_gemini_runs_are_registered() -> None:
    assert {"gemini-implicit", "gemini-explicit"} <= set(PROVIDER_RUNS)


async def test_the_implicit_run_crosses_the_gap_with_two_pings_near_its_floor() -> None:
    (figures,) = await run_providers_bench(("gemini-implicit",))
    total = figures.total
    assert total.undeclared == 0
    assert total.keep_warm_calls == 2  # an implicit entry lives 180 s: pings at 150 and 300 s
    # The two pings (0.1 of the prefix each) are the whole distance to the floor: +5.4%
    # at 180 s (the low end of "3-5 minutes"); one ping, at 240 s, would be +2.7%.
    assert over_floor(figures) < 0.06
    assert to_dict(figures)["notes"] == [
        "explicit caches: 0 tokens created and 0.00 token-hours stored (0 base-input tokens) "
        "bought reads of 0 tokens (saving 0)"
    ]


async def test_the_explicit_run_shows_its_storage_against_the_reads_it_bought() -> None:
    (figures,) = await run_providers_bench(("gemini-explicit",))
    assert figures.total.undeclared == 0
    (note,) = figures.notes
    found = re.fullmatch(
        r"explicit caches: ([\d,]+) tokens created and ([\d.,]+) token-hours stored "
        r"\(([\d,]+) base-input tokens\) bought reads of ([\d,]+) tokens \(saving ([\d,]+)\)",
        note,
    )
    assert found is not None, note
    created, hours, _, reads, _ = (float(g.replace(",", "")) for g in found.groups())
    assert created > 0
    assert hours > 0
    assert reads >= 2 * created  # the turn after the gap and the fork read it whole
