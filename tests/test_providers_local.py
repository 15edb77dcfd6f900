"""Self-hosted servers: vLLM's automatic prefix caching and llama.cpp's slots (each rule a
vector of docs/provider-caching.md, "Self-hosted servers"), a zero price and the prefill
a cache saves, and the README's example through the `openai` SDK against
`stoker sim serve` (`openai-compatible+vllm:` / `+llamacpp:`) and in process."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from stoker import Agent
from stoker.cache.accounting.slots import SlotAccountant, SlotSettings
from stoker.cache.models import fallback_info
from stoker.config import Config
from stoker.providers.compat import LocalProvider
from stoker.providers.select import select_provider
from stoker.providers.sim.families import vllm
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.wire.dialects import llamacpp_chat
from stoker.wire.usage import Usage
from tests.provider_rigs import (
    SYSTEM,
    assert_secret_nowhere,
    in_process_example,
    readme_example,
    served_sim,
    word_count,
)

INFO = fallback_info("qwen3-8b", "local")
LONG = "Every function in this module needs a docstring that says why. " * 30


def body(*users: str, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": LONG}]
    for i, text in enumerate(users):
        if i:
            messages.append({"role": "assistant", "content": "Done."})
        messages.append({"role": "user", "content": text})
    return {"model": "qwen3-8b", "messages": messages, **extra}


def test_l1_vllm_reads_whole_blocks_and_recomputes_the_last_token() -> None:
    cache = vllm()
    first = cache.account(body("hello"), INFO, at=0.0)
    again = cache.account(body("hello"), INFO, at=1.0)
    n = first.usage.input_total
    assert first.usage == Usage(uncached=n)
    assert again.usage.read == (n - 1) // 16 * 16


def test_l2_vllm_reads_the_blocks_before_a_change() -> None:
    cache = vllm()
    cache.account(body("hello"), INFO, at=0.0)
    longer = cache.account(body("hello", "and more"), INFO, at=1.0)
    assert longer.usage.read % 16 == 0
    assert longer.usage.read > 0
    assert longer.usage.uncached < 40  # the new turn, and the previous one's last block


def test_l3_llamacpp_reuses_its_slot_up_to_the_common_prefix_but_one_token() -> None:
    slots = SlotAccountant()
    first = slots.account(body("hello"), INFO, at=0.0)
    again = slots.account(body("hello"), INFO, at=1.0)
    assert again.usage.read == first.usage.input_total - 1


def test_l4_llamacpp_picks_the_most_similar_slot_else_the_least_recently_used() -> None:
    slots = SlotAccountant(SlotSettings(slots=2))
    slots.account(body("hello"), INFO, at=0.0)
    other = {"model": "qwen3-8b", "messages": [{"role": "user", "content": "x " * 300}]}
    slots.account(other, INFO, at=1.0)  # no prompt is similar: the free slot
    back = slots.account(body("hello", "more"), INFO, at=2.0)  # its own slot, by similarity
    assert back.usage.read > 0
    third = {"model": "qwen3-8b", "messages": [{"role": "user", "content": "z " * 300}]}
    slots.account(third, INFO, at=3.0)  # takes the least recently used slot: `other`'s
    assert slots.account(body("hello", "more"), INFO, at=4.0).usage.read > 0


def test_l5_a_taken_slot_is_an_eviction_and_cache_prompt_false_reads_nothing() -> None:
    slots = SlotAccountant(SlotSettings(slots=1))
    slots.account(body("hello"), INFO, at=0.0)
    slots.account(
        {"model": "qwen3-8b", "messages": [{"role": "user", "content": "x " * 300}]}, INFO, at=1.0
    )
    lost = slots.account(body("hello"), INFO, at=2.0)
    assert lost.usage.read == 0
    assert lost.misses[0].cause == "evicted"
    fresh = slots.account(body("hello", cache_prompt=False), INFO, at=3.0)
    assert fresh.usage.read == 0


def test_timings_report_the_prefill_a_cache_saved() -> None:
    usage = Usage(uncached=200, read=3000, output=10)
    timings = llamacpp_chat.timings(usage, prefill_per_second=1000.0, decode_per_second=50.0)
    assert (timings["cache_n"], timings["prompt_n"], timings["prompt_ms"]) == (3000, 200, 200.0)
    assert llamacpp_chat.prefill_saved({"timings": timings}) == (3000, 3.0)


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
async def test_readme_example_through_the_openai_sdk_against_the_served_simulator(
    engine: str,
) -> None:
    with served_sim() as served:
        spec = f"openai-compatible+{engine}:{served.url}/{engine}/v1#qwen3-8b"
        async with Agent(
            spec, tools=[word_count], system=SYSTEM, config=Config.from_env({})
        ) as agent:
            example = await readme_example(agent)
    assert example.second_turn_read > 0
    assert example.fork_read > 0
    assert all(r.cost_usd == 0.0 for r in example.turns[0])  # its cost is time
    if engine == "llamacpp":
        assert "prefill saved" in str(example.turns[1][0].explanation)


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
async def test_the_cache_flag_names_the_server_of_an_openai_compatible_spec(engine: str) -> None:
    config = Config.from_env({}, local_cache=engine)
    provider = select_provider("openai-compatible:http://127.0.0.1:9/v1#m", config=config).provider
    assert isinstance(provider, LocalProvider)
    assert provider.engine == engine
    assert provider.model_info("m").price is not None
    assert provider.model_info("m").input == 0.0


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
async def test_readme_example_on_the_in_process_simulator(engine: str) -> None:
    await in_process_example("qwen3-8b", SimProvider(dialect=f"{engine}_chat"))


async def test_the_sdk_talks_to_loopback_and_the_key_reaches_no_log_record_or_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key, db = "sk-local-server-4d1e", tmp_path / "s.db"
    with served_sim() as served:
        config = Config.from_env({"OPENAI_API_KEY": key}, local_cache="llamacpp")
        spec = f"openai-compatible:{served.url}/llamacpp/v1#qwen3-8b"
        provider = select_provider(spec, config=config).provider
        assert isinstance(provider, LocalProvider)
        assert provider.base_url.startswith("http://127.0.0.1:")
        async with (
            SQLiteStore(db) as store,
            Agent("qwen3-8b", provider=provider, system=SYSTEM) as agent,
        ):
            await readme_example(agent, store=store)
        shown = repr(provider) + repr(config)
    assert_secret_nowhere(key, caplog, db=db, shown=shown)
