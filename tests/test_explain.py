"""The explainer names the first slot that moved, in render order, and classifies it."""

from __future__ import annotations

import base64
import dataclasses

from stoker.cache.explain import classify_text, explain, first_divergence
from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import TimePolicy
from stoker.clock import FrozenClock
from stoker.wire.blocks import ImageBlock, TextBlock, ToolUseBlock
from stoker.wire.canonical import canonical_json
from stoker.wire.messages import AssistantMessage, UserMessage, user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import Request
from stoker.wire.usage import Usage
from tests.helpers import make_registry, sim_agent
from tests.images import png


def _tool(name: str, path_description: str = "Path to read.") -> bytes:
    return canonical_json(
        {
            "name": name,
            "description": f"The {name} tool.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": path_description}},
            },
        }
    )


PREFIX = Prefix(
    params=CacheParams(model="claude-sonnet-4-6"),
    tools=(_tool("a"), _tool("b"), _tool("c"), _tool("d")),
    system="You help.\nToday's date: 2026-09-21.",
)
HISTORY = (user_text("hi"), AssistantMessage(content=(TextBlock(text="hello"),)))


def _req(prefix: Prefix = PREFIX, messages: tuple = HISTORY) -> Request:  # type: ignore[type-arg]
    return Request(prefix=prefix, messages=messages)


def test_append_only_history_is_not_a_divergence() -> None:
    assert first_divergence(_req(), _req(messages=(*HISTORY, user_text("more")))) is None


def test_tool_description_change_names_the_key_path() -> None:
    tools = list(PREFIX.tools)
    tools[3] = _tool("d", "Path to read, relative to the root.")
    found = first_divergence(_req(), _req(dataclasses.replace(PREFIX, tools=tuple(tools))))
    assert found is not None
    assert (found.verdict, found.slot, found.classification) == (
        "diverged",
        "tools[3].input_schema.properties.path.description",
        "changed",
    )


def test_tool_reorder_is_classified() -> None:
    reordered = dataclasses.replace(PREFIX, tools=tuple(reversed(PREFIX.tools)))
    found = first_divergence(_req(), _req(reordered))
    assert found is not None
    assert (found.slot, found.classification) == ("tools", "reorder")


def test_timestamp_in_system_is_found_at_its_byte() -> None:
    old = dataclasses.replace(PREFIX, system="You help. Now: 2026-09-21 10:00:01.")
    new = dataclasses.replace(PREFIX, system="You help. Now: 2026-09-21 10:00:02.")
    found = first_divergence(_req(old), _req(new))
    assert found is not None
    assert (found.slot, found.offset, found.classification) == (
        "system[0]",
        len(b"You help. Now: 2026-09-21 10:00:0"),
        "timestamp-like",
    )


def test_parameter_change_is_named() -> None:
    found = first_divergence(_req(), _req(PREFIX.with_params(tool_choice="any")))
    assert found is not None
    assert (found.slot, found.classification) == ("params.tool_choice", "parameter change")


def test_edited_tool_arguments_whitespace_is_classified() -> None:
    a = AssistantMessage(content=(ToolUseBlock(id="t", name="a", input_json='{"p": 1}'),))
    b = AssistantMessage(content=(ToolUseBlock(id="t", name="a", input_json='{"p":1}'),))
    found = first_divergence(_req(messages=(user_text("x"), a)), _req(messages=(user_text("x"), b)))
    assert found is not None
    assert (found.slot, found.classification) == ("messages[1].content[0].input_json", "whitespace")


def test_removed_message_is_named() -> None:
    found = first_divergence(_req(), _req(messages=HISTORY[:1]))
    assert found is not None
    assert (found.slot, found.classification) == ("messages[1]", "removed")


def test_classify_text_kinds() -> None:
    assert classify_text("id 3f2a9c1e-77aa-4b1c", "id 9e1b0c2d-11bb-4c2d") == "id-like"
    assert classify_text("a  b", "a b") == "whitespace"
    assert classify_text("tea", "coffee") == "changed"


def test_no_change_and_no_read_after_a_long_gap_is_expiry() -> None:
    exp = explain(_req(), _req(), usage=Usage(written_5m=100), gap_seconds=400)
    assert exp.verdict == "expired"
    assert "400 s" in exp.detail


def test_provider_facts_explain_a_miss_when_nothing_moved() -> None:
    exp = explain(
        _req(),
        _req(),
        usage=Usage(written_5m=100),
        facts=(("lookback", "entry 25 positions back"),),
    )
    assert (exp.verdict, exp.detail) == ("lookback", "entry 25 positions back")


def test_declared_break_wins() -> None:
    exp = explain(
        _req(), _req(PREFIX.with_params(model="x")), usage=Usage(), declared_break="model switch"
    )
    assert (exp.verdict, exp.detail, exp.is_break) == ("declared", "model switch", False)


def test_a_first_call_below_the_minimum_says_so() -> None:
    facts = (("below_minimum", "the 380-token prefix is shorter than the minimum"),)
    exp = explain(None, _req(), usage=Usage(uncached=380), facts=facts)
    assert (exp.verdict, exp.detail) == ("below_minimum", facts[0][1])


def test_provider_facts_come_before_the_nothing_written_rule() -> None:
    facts = (("below_minimum", "too short"),)
    exp = explain(_req(), _req(), usage=Usage(uncached=400), facts=facts, previous_written=0)
    assert exp.verdict == "below_minimum"
    plain = explain(_req(), _req(), usage=Usage(written_5m=400), previous_written=0)
    assert plain.verdict == "first"


def test_a_partial_expiry_names_the_entry_and_is_not_a_hit() -> None:
    fact = ("expired", "the cache entry for the 2,453-token prefix expired 60 s ago (TTL 5m)")
    exp = explain(
        _req(),
        _req(),
        usage=Usage(read=2407, written_5m=54),
        facts=[fact],
        gap_seconds=360,
        previous_cached=2453,
    )
    assert exp.verdict == "expired"
    assert exp.detail == f"read 2407 only: {fact[1]}"
    plain = explain(
        _req(), _req(), usage=Usage(read=2407, written_5m=54), gap_seconds=360, previous_cached=2453
    )  # a real provider says nothing: the gap does
    assert plain.verdict == "expired"
    assert "read 2407 of the 2453 tokens" in plain.detail
    whole = explain(
        _req(), _req(), usage=Usage(read=2453, written_5m=8), gap_seconds=30, previous_cached=2453
    )
    assert whole.verdict == "hit"


async def test_a_partial_expiry_record_says_what_the_rewrite_cost() -> None:
    clock = FrozenClock()
    policy = CachePolicy(system_ttl="1h", keep_warm=TimePolicy(enabled=False))
    agent, _ = sim_agent(registry=make_registry(), clock=clock, cache_policy=policy)
    session = agent.session()
    await session.send("read_file 'a.md'")
    clock.advance(minutes=6)  # the 1h tools+system entry lives; the history's 5m one not
    first = (await session.send("again")).records[0]
    assert (first.explanation.verdict, first.usage.read > 0) == ("expired", True)
    assert "again cost $" in first.explanation.detail


def test_the_first_image_names_why_the_conversation_was_written_again() -> None:
    image = ImageBlock(media_type="image/png", data=base64.b64encode(png(8, 8)).decode())
    with_image = UserMessage(content=(TextBlock(text="what is it?"), image))
    before = _req()
    after = _req(messages=(*HISTORY, with_image))
    usage = Usage(read=2000, written_5m=460)
    exp = explain(before, after, usage=usage, previous_cached=2453)
    assert (exp.verdict, exp.slot, exp.classification) == (
        "hit",
        "messages[2].content[1]",
        "first image",
    )
    assert "read 2000 of the 2453 tokens" in exp.detail
    assert "the first image of a conversation changes the cache key of its messages" in exp.detail
    # the call after it, or a call that read all, is a plain hit
    later = _req(
        messages=(
            *HISTORY,
            with_image,
            AssistantMessage(content=(TextBlock(text="a dot"),)),
            user_text("ok"),
        )
    )
    assert (
        explain(after, later, usage=Usage(read=2460), previous_cached=2460).classification is None
    )
    assert (
        explain(before, after, usage=Usage(read=2453), previous_cached=2453).classification is None
    )
