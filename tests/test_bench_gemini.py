"""The hard workload on Gemini (`stoker bench cache --workload providers`): the implicit
cache with pings across the gap, and explicit caches with their storage spend set against
the reads they bought, each held to the floor of its own kind of cache."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from stoker.bench.gemini import MODEL, Crossing, crossing_floor, floor_units
from stoker.bench.providers import PROVIDER_RUNS, over_floor, run_providers_bench, to_dict
from stoker.cache.models import model_info

# The hard workload's gap: the call after it reads 7,787 tokens sent before it, 5,479 of
# them the session's first request (tools, system prompt, first message).
SIX_MINUTES = Crossing(seconds=360.0, carried=7787, first_request=5479)


def test_both_gemini_runs_are_registered() -> None:
    assert {"gemini-implicit", "gemini-explicit"} <= set(PROVIDER_RUNS)


def test_an_implicit_entry_crosses_a_gap_with_the_fewest_pings_or_a_rewrite() -> None:
    info = model_info(MODEL)  # an entry lives 180 s after its last read; reads 0.1
    # 360 s: reads at (say) 179 and 358 s keep it; one read cannot
    assert crossing_floor("implicit", SIX_MINUTES, info) == pytest.approx(2 * 0.1 * 7787)
    assert crossing_floor("implicit", replace(SIX_MINUTES, seconds=179.0), info) == 0.0
    # three hours would take 60 reads (6.0 a token): rewriting it (0.9) is cheaper
    three_hours = replace(SIX_MINUTES, seconds=3 * 3600.0)
    assert crossing_floor("implicit", three_hours, info) == pytest.approx(0.9 * 7787)


def test_an_explicit_cache_holds_only_what_was_never_billed_and_rewrites_the_rest() -> None:
    info = model_info(MODEL)  # storage $1.00 per million token-hours, input $0.30
    # The first request's tokens, in a cache made before the first call: 0.1 h of storage
    # at 1.00 / 0.30 a token-hour, and the first call reads them (0.1) where it would have
    # written them. The history had been billed when sent: a cache of it is a second
    # creation (1.0), so the return rewrites it (0.9).
    held = (1.0 / 0.3 * 0.1 + 0.1) * 5479
    assert crossing_floor("explicit", SIX_MINUTES, info) == pytest.approx(held + 0.9 * 2308)
    # past about 15 minutes storage costs more than a rewrite of everything
    three_hours = replace(SIX_MINUTES, seconds=3 * 3600.0)
    assert crossing_floor("explicit", three_hours, info) == pytest.approx(0.9 * 7787)


def test_the_floor_is_the_distinct_tokens_written_the_rest_read_and_the_gap_crossed() -> None:
    info = model_info(MODEL)
    crossing = crossing_floor("explicit", SIX_MINUTES, info)
    # 14,000 input tokens, 8,000 of them distinct: written once (1.0), the rest read (0.1)
    floor = floor_units("explicit", info, spent=14000, ideal=8000, crossings=[SIX_MINUTES])
    assert floor == pytest.approx(8000 + 0.1 * 6000 + crossing)
    assert floor_units("implicit", info, spent=14000, ideal=8000, crossings=[]) == 8600


async def test_the_implicit_run_crosses_the_gap_with_two_pings_at_its_floor() -> None:
    (figures,) = await run_providers_bench(("gemini-implicit",))
    total = figures.total
    assert total.undeclared == 0
    assert total.keep_warm_calls == 2  # an entry lives 180 s: pings at 150 and 300 s
    # The two pings are the floor's own crossing (a rewrite would cost 0.9 of the prefix);
    # what is left is their placeholder message.
    assert 0.0 <= over_floor(figures) < 0.01
    row = to_dict(figures)
    assert row["written"] == total.uncached  # implicit writes: the uncached input
    assert row["notes"] == [
        "explicit caches: 0 tokens created and 0.00 token-hours stored (0 base-input tokens) "
        "bought reads of 0 tokens (saving 0)"
    ]


async def test_the_explicit_run_shows_its_storage_against_the_reads_it_bought() -> None:
    (figures,) = await run_providers_bench(("gemini-explicit",))
    total = figures.total
    # The one miss is the floor's own: the history after the cached tools and system
    # expired in the gap as the time policy chose (holding it costs more than writing it
    # again), and the turn after the gap wrote it again.
    (miss,) = total.misses
    assert " expired [time policy]: " in miss, miss
    assert total.undeclared == 1
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
    # one cache, of the tools and system, made before the first call: every call until the
    # process ended (the one after the gap and the fork's too) read it whole
    assert created < total.ideal
    assert reads > 20 * created
    # A creation re-bills tokens the loop had sent: both count as written.
    assert to_dict(figures)["written"] == created + total.uncached
    # The floor is a lower bound (holding the first request's tokens from before the first
    # call, rewriting the history at the return). The run caches the tools and system before
    # its first call and keeps that cache across the gap, so nothing is created twice; what
    # is left is the first message, rewritten at the return rather than held.
    assert 0.0 <= over_floor(figures) < 0.05
