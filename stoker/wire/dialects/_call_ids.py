"""Ids for tool calls a server sent without one.

OpenAI-compatible servers (local and hosted open-weight models) sometimes omit a call's
`id` / `call_id`, or send it null or empty. A call needs an id: its result is matched
to it, and every later request sends the id back, in the assistant's call and in the
tool result, so it is part of the cached prefix. A filled id is therefore derived from
the response as received, never random: the same response always reads back with the
same ids, and once stored they are replayed like any id the server sent. Position is in
the hash, so two parallel calls with the same name and arguments still differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from stoker.wire.blocks import Block, ToolUseBlock

PREFIX = "call_"  # what OpenAI's own call ids start with, in both APIs


def with_call_ids(blocks: Sequence[Block], response: dict[str, Any]) -> tuple[Block, ...]:
    """`blocks` with an id on every tool call; an id the server sent is kept as given."""
    calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
    if all(call.id for call in calls):
        return tuple(blocks)
    # ASCII-escaped: a lone surrogate in the body must not stop the hash.
    seed = hashlib.sha256(json.dumps(response, sort_keys=True).encode()).hexdigest()
    taken = {call.id for call in calls if call.id}
    out: list[Block] = []
    position = 0  # among the response's tool calls
    for block in blocks:
        if isinstance(block, ToolUseBlock):
            if not block.id:
                salt = 0
                while (made := _derived(seed, position, block, salt)) in taken:
                    salt += 1  # a clash with an id already in the response: the next salt
                taken.add(made)
                block = replace(block, id=made)
            position += 1
        out.append(block)
    return tuple(out)


def _derived(seed: str, position: int, call: ToolUseBlock, salt: int) -> str:
    text = json.dumps([seed, position, call.name, call.input_json, salt])
    return PREFIX + hashlib.sha256(text.encode()).hexdigest()[:24]
