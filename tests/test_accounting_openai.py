"""OpenAI cache accounting against the worked examples N1-N4 of docs/provider-caching.md,
"OpenAI simulator".

gpt-5.6 is regime N (implicit + explicit breakpoints, paid writes, minimum 1,024);
gpt-4.1 is regime L (implicit 128-token grid from 1,024, free writes).

Sizes are o200k_base tokens as OpenAI counts them: a message's size includes its frame
(3 tokens and its role), and every request ends with the 3 tokens priming the reply,
which come after the last ending and so are never cached (`PRIMING`).
"""

from __future__ import annotations

from typing import Any

import pytest

from stoker.cache.accounting import (
    CacheBreakpoint,
    MissFact,
    OpenAIAccountant,
    OpenAISettings,
)
from stoker.errors import InvalidRequest
from stoker.wire.dialects import openai_chat, openai_responses
from stoker.wire.usage import Usage
from tests.accounting_helpers import O200K, frame, openai_message, openai_pad, part

NEW = "gpt-5.6"
OLD = "gpt-4.1"
PRIMING = 3  # <|start|>assistant<|message|>, after every prompt


def responses(*items: dict[str, Any], model: str = NEW, **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": list(items), **extra}


def chat(*messages: dict[str, Any], model: str = NEW, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": list(messages), **extra}


def developer(n: int = 1500, *, ttl: str | None = None) -> dict[str, Any]:
    """A developer message of `n` tokens; a breakpoint ends with it."""
    return {"role": "developer", "content": [part(n - frame("developer"), ttl=ttl)]}


def asks(question: str, n: int = 100) -> dict[str, Any]:
    return openai_message("user", n, question)


def test_n1_implicit_mode_writes_at_the_user_message_so_a_new_question_misses() -> None:
    acc = OpenAIAccountant()
    first = acc.account(responses(developer(), asks("one")), api="responses", at=0.0)
    assert first.usage == Usage(written_5m=1600, uncached=PRIMING)
    assert first.breakpoints == (CacheBreakpoint(index=1, ttl="30m", tokens=1600),)
    second = acc.account(responses(developer(), asks("two")), api="responses", at=10.0)
    assert second.usage == Usage(written_5m=1600, uncached=PRIMING)


def test_n2_explicit_breakpoint_after_the_developer_block_is_read_back() -> None:
    acc = OpenAIAccountant()
    options = {"prompt_cache_options": {"mode": "explicit"}}
    first = responses(developer(ttl="30m"), asks("one"), **options)
    usage = acc.account(first, api="responses", at=0.0).usage
    assert usage == Usage(written_5m=1500, uncached=100 + PRIMING)
    second = responses(developer(ttl="30m"), asks("two"), **options)
    outcome = acc.account(second, api="responses", at=10.0)
    assert outcome.usage == Usage(read=1500, uncached=100 + PRIMING)
    assert outcome.hit_index == 0


def loop_turns() -> list[list[dict[str, Any]]]:
    """Responses items of an agent loop: user -> call -> output -> assistant -> user."""
    turn1 = [developer(), asks("read a.txt")]
    call = {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"p":"a"}'}
    output = {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": openai_pad(200 - frame("tool")),
    }
    turn2 = [*turn1, call, output]
    text = part(80 - frame("assistant"), kind="output_text")
    reply = {"type": "message", "role": "assistant", "content": [text]}
    turn3 = [*turn2, reply, asks("thanks", 70)]
    return [turn1, turn2, turn3]


# A call is framed like a message: 3 tokens, then `read` and '{"p":"a"}' ('{"', 'p',
# '":"', 'a', '"}').
CALL = 3 + O200K.count("read") + O200K.count('{"p":"a"}')


def test_n3_implicit_agent_loop_reads_the_previous_ending_and_writes_the_delta() -> None:
    acc = OpenAIAccountant()
    previous = 0
    for k, items in enumerate(loop_turns()):
        outcome = acc.account(responses(*items), api="responses", at=10.0 * k)
        ending = outcome.total_tokens - PRIMING
        assert outcome.usage == Usage(read=previous, written_5m=ending - previous, uncached=PRIMING)
        previous = ending
    assert (CALL, previous) == (9, 1600 + CALL + 200 + 80 + 70)


def test_n3_chat_payload_accounts_the_same_loop() -> None:
    acc = OpenAIAccountant()
    system = openai_message("system", 1500)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": '{"p":"a"}'},
    }
    turn1 = [system, asks("read a.txt")]
    turn2 = [
        *turn1,
        {"role": "assistant", "content": None, "tool_calls": [call]},  # only its call
        openai_message("tool", 200, tool_call_id="call_1"),
    ]
    turn3 = [*turn2, openai_message("assistant", 80), asks("thanks", 70)]
    usages = [
        acc.account(chat(*m), api="chat", at=10.0 * k).usage
        for k, m in enumerate([turn1, turn2, turn3])
    ]
    assert usages == [
        Usage(written_5m=1600, uncached=PRIMING),
        Usage(read=1600, written_5m=CALL + 200, uncached=PRIMING),
        Usage(read=1600 + CALL + 200, written_5m=150, uncached=PRIMING),
    ]


def test_n4_legacy_grid_rounds_the_shared_prefix_down_to_128() -> None:
    acc = OpenAIAccountant()
    system = openai_message("system", 2950)
    first = chat(system, asks("alpha", 50), model=OLD)
    assert acc.account(first, api="chat", at=0.0).usage == Usage(uncached=3000 + PRIMING)
    second = chat(system, asks("beta", 50), model=OLD)
    outcome = acc.account(second, api="chat", at=5.0)
    # Equal through 2,953 (the user message's head is the same), cached from 2,944.
    assert outcome.usage == Usage(read=2944, uncached=3000 + PRIMING - 2944)
    assert outcome.hit_index == 0


def test_legacy_grid_anchored_at_the_start_of_hidden_content() -> None:
    settings = OpenAISettings(hidden_tokens=100, grid_anchor="start")
    acc = OpenAIAccountant(settings)
    system = openai_message("system", 2950)
    acc.account(chat(system, asks("alpha", 50), model=OLD), api="chat", at=0.0)
    outcome = acc.account(chat(system, asks("beta", 50), model=OLD), api="chat", at=1.0)
    # Boundaries at 1152, 1280, ... 2944 counted from the hidden start: 2944 - 100 visible.
    assert outcome.usage == Usage(read=2816, uncached=3000 + PRIMING - 2816)


def test_explicit_mode_without_breakpoints_caches_nothing() -> None:
    payload = responses(developer(), asks("one"), prompt_cache_options={"mode": "explicit"})
    acc = OpenAIAccountant()
    for at in (0.0, 1.0):
        outcome = acc.account(payload, api="responses", at=at)
        assert outcome.usage == Usage(uncached=1600 + PRIMING)
        assert outcome.misses == (MissFact(cause="no_breakpoints"),)


def test_changing_prompt_cache_key_misses() -> None:
    acc = OpenAIAccountant()
    items = (developer(), asks("one"))
    acc.account(responses(*items, prompt_cache_key="a"), api="responses", at=0.0)
    same = acc.account(responses(*items, prompt_cache_key="a"), api="responses", at=1.0)
    assert same.usage == Usage(read=1600, uncached=PRIMING)
    moved = acc.account(responses(*items, prompt_cache_key="b"), api="responses", at=2.0)
    assert moved.usage == Usage(written_5m=1600, uncached=PRIMING)


def test_regime_n_ttl_split_and_expiry() -> None:
    acc = OpenAIAccountant()
    payload = responses(developer(ttl="12h"), asks("one"))
    assert acc.account(payload, api="responses", at=0.0).usage == Usage(
        written_1h=1500, written_5m=100, uncached=PRIMING
    )
    later = acc.account(payload, api="responses", at=3600.0)
    assert later.usage == Usage(read=1500, written_5m=100, uncached=PRIMING)
    assert later.misses == (
        MissFact(cause="expired", index=1, tokens=1600, ttl="30m", expired_for=1800.0, idle=3600.0),
    )


def test_regime_l_in_memory_entries_expire_when_idle() -> None:
    acc = OpenAIAccountant()
    payload = chat(
        openai_message("system", 2000),
        asks("hi", 48),
        model=OLD,
        prompt_cache_retention="in_memory",
    )
    acc.account(payload, api="chat", at=0.0)
    assert acc.account(payload, api="chat", at=540.0).usage == Usage(read=2048, uncached=PRIMING)
    outcome = acc.account(payload, api="chat", at=540.0 + 601.0)
    assert outcome.usage == Usage(uncached=2048 + PRIMING)
    assert outcome.misses == (
        MissFact(
            cause="expired", index=1, tokens=2048, ttl="in_memory", expired_for=1.0, idle=601.0
        ),
    )


def test_regime_l_in_memory_entries_live_at_most_an_hour() -> None:
    acc = OpenAIAccountant()
    payload = chat(openai_message("system", 2048), model=OLD, prompt_cache_retention="in_memory")
    reads = [acc.account(payload, api="chat", at=540.0 * k).usage.read for k in range(8)]
    assert reads == [0, 2048, 2048, 2048, 2048, 2048, 2048, 0]


def test_regime_l_default_retention_is_24h_with_a_30_minute_idle_timer() -> None:
    acc = OpenAIAccountant()
    payload = chat(openai_message("system", 2048), model=OLD)
    acc.account(payload, api="chat", at=0.0)
    assert acc.account(payload, api="chat", at=1700.0).usage.read == 2048
    assert acc.account(payload, api="chat", at=1700.0 + 1801.0).usage.read == 0


def test_regime_l_below_minimum() -> None:
    payload = chat(openai_message("system", 1000 - PRIMING), model=OLD)
    outcome = OpenAIAccountant().account(payload, api="chat", at=0.0)
    assert outcome.usage == Usage(uncached=1000)
    assert outcome.misses == (MissFact(cause="below_minimum", tokens=1000, minimum=1024),)


def test_hidden_tokens_shift_the_grid_but_are_not_reported() -> None:
    acc = OpenAIAccountant(OpenAISettings(hidden_tokens=300))
    system = openai_message("system", 2950)
    acc.account(chat(system, asks("alpha", 50), model=OLD), api="chat", at=0.0)
    outcome = acc.account(chat(system, asks("beta", 50), model=OLD), api="chat", at=1.0)
    assert outcome.usage == Usage(read=2944, uncached=3000 + PRIMING - 2944)


def test_function_call_arguments_are_hashed_byte_for_byte() -> None:
    acc = OpenAIAccountant()
    turn2 = loop_turns()[1]
    acc.account(responses(*turn2), api="responses", at=0.0)
    spaced = [dict(item) for item in turn2]
    spaced[2]["arguments"] = '{"p": "a"}'
    outcome = acc.account(responses(*spaced), api="responses", at=1.0)
    assert outcome.usage.read == 0  # only the end of the turn was written, and it moved


def test_extending_a_message_loses_the_entry_at_its_old_end() -> None:
    acc = OpenAIAccountant()
    acc.account(responses(developer(), asks("one")), api="responses", at=0.0)
    longer = {"role": "user", "content": asks("one")["content"] + " more words"}
    outcome = acc.account(responses(developer(), longer), api="responses", at=1.0)
    assert outcome.usage.read == 0


def test_lookback_covers_20_earlier_endings_then_reports_the_one_beyond() -> None:
    acc = OpenAIAccountant()
    items: list[dict[str, Any]] = [openai_message("developer", 1000), asks("q0", 30)]
    acc.account(responses(*items), api="responses", at=0.0)
    for k in range(1, 22):
        items += [openai_message("assistant", 10), asks(f"q{k}", 10)]
    outcome = acc.account(responses(*items), api="responses", at=1.0)
    assert outcome.usage.read == 0
    assert outcome.misses == (MissFact(cause="lookback", index=1, tokens=1030, positions_back=21),)
    latest80 = OpenAIAccountant(OpenAISettings(lookup="latest80"))
    latest80.account(responses(*items[:2]), api="responses", at=0.0)
    assert latest80.account(responses(*items), api="responses", at=1.0).usage.read == 1030


def test_parallel_requests_do_not_read_each_other() -> None:
    acc = OpenAIAccountant(OpenAISettings(ttft=1.5))
    payload = responses(developer(), asks("one"))
    acc.account(payload, api="responses", at=0.0)
    outcome = acc.account(payload, api="responses", at=0.5)
    assert outcome.usage == Usage(written_5m=1600, uncached=PRIMING)
    assert outcome.misses == (MissFact(cause="concurrent", index=1, tokens=1600, available_in=1.0),)


def test_chat_explicit_breakpoint_on_a_text_part() -> None:
    acc = OpenAIAccountant()
    text = part(1500 - frame("system"), ttl="30m", kind="text")
    system = {"role": "system", "content": [text]}
    options = {"prompt_cache_options": {"mode": "explicit", "ttl": "30m"}}
    acc.account(chat(system, asks("one"), **options), api="chat", at=0.0)
    outcome = acc.account(chat(system, asks("two"), **options), api="chat", at=1.0)
    assert outcome.usage == Usage(read=1500, uncached=100 + PRIMING)


def test_reasoning_effort_is_part_of_the_namespace() -> None:
    acc = OpenAIAccountant()
    items = (developer(), asks("one"))
    acc.account(responses(*items, reasoning={"effort": "low"}), api="responses", at=0.0)
    payload = responses(*items, reasoning={"effort": "high"})
    assert acc.account(payload, api="responses", at=1.0).usage.read == 0


def test_bad_cache_options_are_rejected() -> None:
    acc = OpenAIAccountant()
    with pytest.raises(InvalidRequest, match=r"prompt_cache_options\.mode"):
        acc.account(
            responses(asks("a"), prompt_cache_options={"mode": "always"}), api="responses", at=0.0
        )
    bad = {"role": "user", "content": [part(10, ttl="5m")]}
    with pytest.raises(
        InvalidRequest, match=r"input\[0\]\.content\.0\.prompt_cache_breakpoint\.ttl"
    ):
        acc.account(responses(bad), api="responses", at=0.0)


def test_usage_under_openai_field_names() -> None:
    usage = Usage(uncached=100, written_5m=30, written_1h=20, read=1500, output=7)
    assert openai_chat.usage_fields(usage) == {
        "prompt_tokens": 1650,
        "completion_tokens": 7,
        "total_tokens": 1657,
        "prompt_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 50},
    }
    assert openai_responses.usage_fields(usage) == {
        "input_tokens": 1650,
        "input_tokens_details": {
            "cached_tokens": 1500,
            "cache_write_tokens": 50,
            "cache_write_tokens_details": {"ttl_30m_tokens": 30, "ttl_12h_tokens": 20},
        },
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 1657,
    }
