"""Wire values: canonical bytes, frozen prefixes that round-trip, messages that keep their bytes."""

from __future__ import annotations

import dataclasses

import pytest

from stoker.errors import WireError
from stoker.wire.blocks import TextBlock, ToolResultBlock, ToolUseBlock, block_from_dict
from stoker.wire.canonical import canonical_json, canonicalize
from stoker.wire.fingerprint import EMPTY_CHAIN, SlotFingerprints, chain_step
from stoker.wire.messages import (
    AssistantMessage,
    UserMessage,
    message_from_dict,
    message_to_dict,
    user_text,
)
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Breakpoint
from stoker.wire.usage import Usage

TOOL = canonical_json(
    {"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}}
)


def test_canonical_json_sorts_keys_and_keeps_unicode() -> None:
    assert (
        canonical_json({"b": 1, "a": {"d": "é", "c": [2, 1]}})
        == '{"a":{"c":[2,1],"d":"é"},"b":1}'.encode()
    )
    assert canonicalize({"b": {"z": 1, "y": 2}, "a": 0}) == {"a": 0, "b": {"y": 2, "z": 1}}
    assert list(canonicalize({"b": {"z": 1, "y": 2}, "a": 0})) == ["a", "b"]


def test_prefix_round_trips_byte_identically() -> None:
    prefix = Prefix(
        params=CacheParams(model="claude-sonnet-4-6", thinking_budget=2048, effort="high"),
        tools=(TOOL,),
        system="You are helpful.\nToday's date: 2026-09-21.",
    )
    again = Prefix.from_json(prefix.to_json())
    assert again == prefix
    assert again.to_json() == prefix.to_json()
    assert again.fingerprint == prefix.fingerprint
    assert hash(again) == hash(prefix)


def test_prefix_is_frozen_and_fingerprint_tracks_every_slot() -> None:
    prefix = Prefix(params=CacheParams(model="m"), tools=(TOOL,), system="s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        prefix.system = "other"  # type: ignore[misc]
    variants = [
        prefix.with_params(model="n"),
        prefix.with_params(tool_choice="any"),
        dataclasses.replace(prefix, system="s "),
        dataclasses.replace(prefix, tools=()),
    ]
    assert len({prefix.fingerprint, *(v.fingerprint for v in variants)}) == 5


def test_prefix_rejects_duplicate_tool_names() -> None:
    with pytest.raises(WireError, match="duplicate tool names"):
        Prefix(params=CacheParams(model="m"), tools=(TOOL, TOOL))


def test_tool_arguments_are_kept_as_sent() -> None:
    raw = '{"b": 1,  "a":2}'
    block = ToolUseBlock(id="t1", name="x", input_json=raw)
    message = AssistantMessage(content=(TextBlock(text="ok"), block))
    again = message_from_dict(message_to_dict(message))
    assert again == message
    assert again.tool_calls[0].input_json == raw
    assert block.arguments() == {"b": 1, "a": 2}


def test_a_message_hashes_its_blocks_once_and_only_when_asked() -> None:
    """The simulator parses every request's new messages and reads few of their hashes."""
    message = user_text("hello", note="time: 10:00")
    assert message._fingerprints is None  # noqa: SLF001
    first = message.block_fingerprints
    assert len(first) == 2
    assert message.block_fingerprints is first
    assert dataclasses.replace(message) == message  # the hashes are no part of the value


def test_invalid_tool_arguments_raise_wire_error() -> None:
    with pytest.raises(WireError, match="invalid JSON"):
        ToolUseBlock(id="t1", name="x", input_json="{nope").arguments()


def test_message_fingerprints_are_per_block_and_stable() -> None:
    a = user_text("hello", note="time: 10:00")
    b = user_text("hello", note="time: 10:01")
    assert a.block_fingerprints[0] == b.block_fingerprints[0]
    assert a.block_fingerprints[1] != b.block_fingerprints[1]
    assert chain_step(EMPTY_CHAIN, a) != chain_step(EMPTY_CHAIN, b)
    assert chain_step(EMPTY_CHAIN, a) == chain_step(
        EMPTY_CHAIN, user_text("hello", note="time: 10:00")
    )


def test_unknown_block_kind_is_a_clear_error() -> None:
    with pytest.raises(WireError, match="unknown block kind 'video'"):
        block_from_dict({"kind": "video"})


def test_empty_user_message_is_refused() -> None:
    with pytest.raises(WireError, match="at least one content block"):
        UserMessage(content=())


def test_tool_results_message_keeps_error_flag() -> None:
    msg = UserMessage(content=(ToolResultBlock(tool_use_id="t", content="boom", is_error=True),))
    assert message_from_dict(message_to_dict(msg)).tool_results[0].is_error is True


def test_usages_add_every_bucket_and_round_trip_through_their_dict() -> None:
    """`Usage` spells its sum out field by field (for speed): a bucket added to the class
    must be added there too, and this test says so."""
    names = [f.name for f in dataclasses.fields(Usage)]
    one = Usage(**{name: i + 1 for i, name in enumerate(names)})
    two = Usage(**{name: 10 * (i + 1) for i, name in enumerate(names)})
    assert (one + two).to_dict() == {name: 11 * (i + 1) for i, name in enumerate(names)}
    assert list(one.to_dict()) == names
    assert Usage.from_dict(one.to_dict()) == one
    assert Usage.total([one, two, one]) == one + two + one


def test_a_cache_record_dict_is_what_the_generic_walk_gave() -> None:
    """`CacheRecord.to_dict` reads its field names once (not `fields()`/`asdict` per
    record): the dict is the same, and it reads back as the record."""
    record = CacheRecord(
        session_id="s1",
        seq=3,
        role="main",
        provider="anthropic",
        model="claude-sonnet-4-6",
        started_at=12.5,
        fingerprints=SlotFingerprints(
            params="p",
            tools=("t",),
            system="s",
            history="h",
            message_count=2,
            new_from=1,
            new_messages=(("b1", "b2"),),
        ),
        breakpoints=(Breakpoint(message=None), Breakpoint(message=1, block=0, ttl="1h")),
        usage=Usage(uncached=5, read=7, output=2),
        cost_usd=0.25,
        explanation=Explanation(verdict="diverged", detail="moved", slot="system", offset=4),
        idle_before=0.0,
    )
    generic = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    generic.update(
        fingerprints=record.fingerprints.to_dict(),
        breakpoints=[dataclasses.asdict(b) for b in record.breakpoints],
        usage=record.usage.to_dict(),
        explanation=dataclasses.asdict(record.explanation),
    )
    del generic["fallback_of"], generic["storage_token_hours"], generic["cache_read"]
    assert record.to_dict() == generic
    assert list(record.to_dict()) == list(generic)
    assert CacheRecord.from_dict(record.to_dict()) == record
