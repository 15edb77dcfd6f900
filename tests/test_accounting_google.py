"""Gemini's caches, one test vector per rule (docs/provider-caching.md, "Gemini": G1-G20).

Sizes use the estimate tokenizer, where `"x " * n` is n tokens; Gemini 2.5 Flash caches
from 1,024 tokens, 2.5 Pro from 4,096; an implicit entry lives 180 s after its last use.
"""

from __future__ import annotations

from typing import Any

import pytest

from stoker.cache.accounting.google import GoogleAccountant, GoogleSettings
from stoker.errors import InvalidRequest
from stoker.wire.usage import Usage

FLASH = "gemini-2.5-flash"


def text(n: int, word: str = "x") -> dict[str, Any]:
    return {"text": f"{word} " * n}


def body(
    system: int,
    *turns: tuple[str, int, str],
    model: str = FLASH,
    cache: str | None = None,
) -> dict[str, Any]:
    """A generateContent body: a system instruction of `system` tokens, then one content
    per (role, tokens, word)."""
    out: dict[str, Any] = {"model": model}
    if cache is not None:
        out["cachedContent"] = cache
    elif system:
        out["systemInstruction"] = {"parts": [text(system, "s")]}
    out["contents"] = [{"role": r, "parts": [text(n, w)]} for r, n, w in turns]
    return out


T1 = ("user", 50, "a")
T2 = (T1, ("model", 200, "b"), ("user", 60, "c"))


def usage(acc: GoogleAccountant, payload: dict[str, Any], at: float) -> Usage:
    return acc.account(payload, at=at, workspace="w").usage


def test_g1_first_request_reads_nothing_and_bills_all_as_input() -> None:
    acc = GoogleAccountant()
    assert usage(acc, body(2000, T1), 0.0) == Usage(uncached=2050)


def test_g2_the_next_turn_reads_the_whole_previous_prompt() -> None:
    acc = GoogleAccountant()
    usage(acc, body(2000, T1), 0.0)
    assert usage(acc, body(2000, *T2), 10.0) == Usage(uncached=260, read=2050)


def test_g3_a_shared_prefix_is_read_up_to_the_last_common_part() -> None:
    acc = GoogleAccountant()
    usage(acc, body(2000, T1), 0.0)
    assert usage(acc, body(2000, ("user", 50, "z")), 5.0) == Usage(uncached=50, read=2000)


def test_g4_a_prompt_under_the_minimum_is_never_cached() -> None:
    acc = GoogleAccountant()
    first = acc.account(body(900, T1), at=0.0, workspace="w")
    assert [f.cause for f in first.misses] == ["below_minimum"]
    assert usage(acc, body(900, T1), 1.0) == Usage(uncached=950)


def test_g5_gemini_2_5_pro_caches_from_4096_tokens() -> None:
    acc = GoogleAccountant()
    pro = "gemini-2.5-pro"
    usage(acc, body(3000, T1, model=pro), 0.0)
    assert usage(acc, body(3000, *T2, model=pro), 1.0).read == 0
    usage(acc, body(4100, T1, model=pro), 2.0)
    assert usage(acc, body(4100, *T2, model=pro), 3.0).read == 4150


def test_g6_an_entry_unused_for_its_idle_ttl_is_gone() -> None:
    acc = GoogleAccountant()
    usage(acc, body(2000, T1), 0.0)
    late = acc.account(body(2000, *T2), at=181.0, workspace="w")
    assert late.usage == Usage(uncached=2310)
    assert late.misses[0].cause == "expired"
    assert late.misses[0].tokens == 2050


def test_g7_a_read_renews_the_entry_so_a_ping_keeps_it() -> None:
    acc = GoogleAccountant()
    usage(acc, body(2000, T1), 0.0)
    assert usage(acc, body(2000, T1), 150.0).read == 2050  # the ping
    assert usage(acc, body(2000, *T2), 300.0) == Usage(uncached=260, read=2050)


def test_g8_key_order_inside_parts_and_call_arguments_is_not_part_of_the_key() -> None:
    acc = GoogleAccountant()
    call = {"functionCall": {"name": "f", "args": {"a": 1, "b": [2, 3]}, "id": "c1"}}
    swapped = {"functionCall": {"id": "c1", "args": {"b": [2, 3], "a": 1}, "name": "f"}}
    reply = {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"}}}

    def turns(c: dict[str, Any]) -> dict[str, Any]:
        payload = body(2000, T1)
        payload["contents"] += [
            {"role": "model", "parts": [c]},
            {"role": "user", "parts": [reply]},
        ]
        return payload

    usage(acc, turns(call), 0.0)
    second = usage(acc, turns(swapped), 1.0)
    assert second.uncached == 0
    assert second.read == second.input_total


def test_g9_an_explicit_cache_is_read_whole_by_a_request_that_names_it() -> None:
    acc = GoogleAccountant()
    made = acc.create_cache(
        {**body(2000, T1), "ttl": "600s", "displayName": "stoker/agent/s"}, at=0.0, workspace="w"
    )
    assert (made.tokens, made.expires_at, made.display_name) == (2050, 600.0, "stoker/agent/s")
    named = body(0, ("model", 200, "b"), ("user", 60, "c"), cache=made.name)
    assert usage(acc, named, 10.0) == Usage(uncached=260, read=2050)
    assert acc.storage_billed("w") == 2050 * 600


def test_g10_a_cache_under_the_minimum_is_refused() -> None:
    acc = GoogleAccountant()
    with pytest.raises(InvalidRequest, match="total_token_count=550, min_total_token_count=1024"):
        acc.create_cache(body(500, T1), at=0.0, workspace="w")


def test_g11_a_named_cache_refuses_its_own_head_and_another_model() -> None:
    acc = GoogleAccountant()
    made = acc.create_cache(body(2000, T1), at=0.0, workspace="w")
    beside = {**body(0, T1, cache=made.name), "systemInstruction": {"parts": [text(1)]}}
    with pytest.raises(InvalidRequest, match="system_instruction, tools or tool_config"):
        acc.account(beside, at=1.0, workspace="w")
    other = body(0, T1, model="gemini-2.5-pro", cache=made.name)
    with pytest.raises(InvalidRequest, match="has to be the same"):
        acc.account(other, at=1.0, workspace="w")


def test_g12_storage_is_billed_for_the_time_a_cache_exists() -> None:
    acc = GoogleAccountant()
    made = acc.create_cache({**body(2000, T1), "ttl": "600s"}, at=0.0, workspace="w")
    longer = acc.update_cache(made.name, {"ttl": "1200s"}, at=300.0, workspace="w")
    assert longer.expires_at == 1500.0
    assert acc.storage_billed("w") == 2050 * 1500
    acc.delete_cache(made.name, at=600.0, workspace="w")
    assert acc.storage_billed("w") == 2050 * 600


def test_g13_an_expired_or_deleted_cache_is_not_found() -> None:
    acc = GoogleAccountant()
    made = acc.create_cache({**body(2000, T1), "ttl": "60s"}, at=0.0, workspace="w")
    with pytest.raises(InvalidRequest, match="CachedContent not found") as found:
        acc.account(body(0, T1, cache=made.name), at=60.0, workspace="w")
    assert found.value.status == 404
    with pytest.raises(InvalidRequest, match="not found"):
        acc.get_cache(made.name, at=61.0, workspace="w")


def test_g14_a_cache_lives_an_hour_when_its_create_names_no_ttl() -> None:
    acc = GoogleAccountant()
    assert acc.create_cache(body(2000, T1), at=5.0, workspace="w").expires_at == 3605.0


def test_g15_with_the_implicit_cache_off_only_explicit_caches_read() -> None:
    acc = GoogleAccountant(GoogleSettings(implicit=False))
    usage(acc, body(2000, T1), 0.0)
    assert usage(acc, body(2000, *T2), 1.0).read == 0
    made = acc.create_cache(body(2000, T1), at=2.0, workspace="w")
    named = body(0, ("model", 200, "b"), ("user", 60, "c"), cache=made.name)
    assert usage(acc, named, 3.0).read == 2050


def test_g16_a_request_naming_a_cache_leaves_implicit_entries_on_its_whole_prompt() -> None:
    acc = GoogleAccountant()
    made = acc.create_cache(body(2000, T1), at=0.0, workspace="w")
    usage(acc, body(0, ("model", 200, "b"), ("user", 60, "c"), cache=made.name), 1.0)
    follow = body(2000, *T2, ("model", 10, "d"), ("user", 10, "e"))
    assert usage(acc, follow, 2.0) == Usage(uncached=20, read=2310)


def test_caches_are_kept_per_workspace() -> None:
    acc = GoogleAccountant()
    made = acc.create_cache(body(2000, T1), at=0.0, workspace="w")
    with pytest.raises(InvalidRequest, match="not found"):
        acc.account(body(0, T1, cache=made.name), at=1.0, workspace="other")
    usage(acc, body(2000, T1), 0.0)
    assert acc.account(body(2000, *T2), at=1.0, workspace="other").usage.read == 0


def one_part(*pieces: tuple[int, str]) -> dict[str, Any]:
    """A body of one user content with one text part: `n` words of each kind, in order."""
    said = "".join(f"{word} " * n for n, word in pieces)
    return {"model": FLASH, "contents": [{"role": "user", "parts": [{"text": said}]}]}


def test_g17_a_document_then_another_question_in_one_part_reads_the_document() -> None:
    acc = GoogleAccountant()
    assert usage(acc, one_part((3000, "d"), (20, "a")), 0.0) == Usage(uncached=3020)
    # the prefix is read on the 256-token grid of the prompt: 11 x 256 of the 3,000 shared
    assert usage(acc, one_part((3000, "d"), (20, "b")), 5.0) == Usage(uncached=204, read=2816)
    assert usage(acc, one_part((3000, "d"), (30, "c")), 9.0) == Usage(uncached=214, read=2816)


def test_g18_a_question_in_front_of_the_document_shares_no_prefix() -> None:
    acc = GoogleAccountant()
    usage(acc, one_part((20, "a"), (3000, "d")), 0.0)
    assert usage(acc, one_part((20, "b"), (3000, "d")), 5.0) == Usage(uncached=3020)


def test_g19_a_system_instruction_that_differs_at_its_end_is_read_to_the_grid() -> None:
    acc = GoogleAccountant()
    first = {"systemInstruction": {"parts": [text(2000, "s"), text(5, "v")]}}
    second = {"systemInstruction": {"parts": [text(2000, "s"), text(5, "w")]}}
    usage(acc, {**body(0, T1), **first}, 0.0)
    assert usage(acc, {**body(0, T1), **second}, 5.0) == Usage(uncached=263, read=1792)


def test_g20_a_part_cut_into_pieces_still_reads_whole_on_the_next_turn() -> None:
    acc = GoogleAccountant()
    usage(acc, one_part((3000, "d")), 0.0)
    later = {
        "model": FLASH,
        "contents": [*one_part((3000, "d"))["contents"], *body(0, T1)["contents"]],
    }
    outcome = acc.account(later, at=5.0, workspace="w")
    assert outcome.usage == Usage(uncached=50, read=3000)
    assert outcome.hit_index == 0  # the whole part, as the explainer counts blocks
