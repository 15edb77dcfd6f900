"""The incremental simulator bills exactly what a full recomputation bills.

Random conversations are sent call after call (appends, forks back to an earlier
history, edits in the middle, moving breakpoints, gaps that cross TTLs) to two
accountants: one keeps its memo of rendered blocks between calls, and may find them by
identity; the other's memo holds almost nothing (capacity 2), so every call renders
from scratch. Their outcomes and cache entries must be equal after every call, and the
memoized parse must read back the same `Request` as a parse without memo.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.cache.accounting import (
    AnthropicAccountant,
    AnthropicSettings,
    OpenAIAccountant,
    OpenAISettings,
)
from stoker.wire.dialects import anthropic, openai_chat, openai_responses
from stoker.wire.dialects._chain import ChainMemo
from tests.accounting_helpers import pad

# One step of a conversation: what it appends, or how it moves.
Step = tuple[str, int]
steps = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "tools", "thinking", "fork", "edit", "gap"]),
        st.integers(min_value=0, max_value=400),
    ),
    min_size=1,
    max_size=14,
)
GAPS = (1.0, 200.0, 400.0, 2000.0, 4000.0)
CHECK = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples every run: CI is reproducible
    suppress_health_check=[HealthCheck.too_slow],
)


class Conversation:
    """A history of wire messages (dicts never mutated once made) and its past versions."""

    def __init__(self, make: Any) -> None:
        self.make = make  # (kind, n, i) -> list of new messages
        self.messages: list[Any] = []
        self.past: list[list[Any]] = []
        self.count = 0

    def apply(self, kind: str, n: int) -> None:
        self.past.append(list(self.messages))
        if kind == "fork" and self.past:
            self.messages = list(self.past[n % len(self.past)])
        elif kind == "edit" and self.messages:
            i = n % len(self.messages)
            self.messages[i] = self.make("user", n, self.count)[0]
        elif kind not in ("gap", "fork", "edit"):
            self.messages += self.make(kind, n, self.count)
        self.count += 1

    def play(self, steps: list[Step]) -> Iterator[tuple[int, float]]:
        """Apply each step; yield its number and the time its call starts."""
        at = 0.0
        for kind, n in steps:
            self.apply(kind, n)
            at += GAPS[n % len(GAPS)] if kind == "gap" else 5.0
            yield n, at


class Replay(Conversation):
    """A conversation sent call after call to two accountants of one kind: `warm` keeps
    its memo between calls, `cold` (memo capacity 2) renders every call from scratch."""

    def __init__(self, make: Any, accountant: Any, accountant_settings: Any) -> None:
        super().__init__(make)
        self.warm = accountant()
        self.cold = accountant(accountant_settings(memo_capacity=2))
        self.memo = ChainMemo()

    def check(
        self, payload: dict[str, Any], dialect: ModuleType, *, at: float, trusted: bool, **api: str
    ) -> None:
        """Both bill `payload` alike and hold the same entries after it, and the memoized
        parse reads it back as a parse without memo does."""
        outcome = self.warm.account(payload, at=at, trusted=trusted, **api)
        assert outcome == self.cold.account(payload, at=at, **api)
        assert self.warm.entries() == self.cold.entries()
        parsed = dialect.parse_request(payload, memo=self.memo, trusted=trusted)
        assert parsed == dialect.parse_request(payload)


def claude_messages(kind: str, n: int, i: int) -> list[dict[str, Any]]:
    text = {"type": "text", "text": pad(10 + n, f"m{i}")}
    if kind == "user":
        return [{"role": "user", "content": [text]}]
    if kind == "assistant":
        return [{"role": "assistant", "content": [text]}]
    if kind == "thinking":
        think = {"type": "thinking", "thinking": pad(5 + n % 50, f"t{i}"), "signature": f"s{i}"}
        return [{"role": "assistant", "content": [think, text]}]
    uses = [
        {"type": "tool_use", "id": f"t{i}_{k}", "name": "read", "input": {"p": k}}
        for k in range(1 + n % 3)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": u["id"], "content": pad(n % 40 + 1)} for u in uses
    ]
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]


def claude_payload(messages: list[Any], n: int, model: str) -> dict[str, Any]:
    """Markers on copies, as the dialects place them: system 1h, and up to two on messages."""
    marked = list(messages)
    blocks = [(m, b) for m, msg in enumerate(marked) for b in range(len(msg["content"]))]
    choices = [blocks[-1 - (n * k) % len(blocks)] for k in range(n % 3)] if blocks else []
    for m, b in sorted(set(choices)):
        content = list(marked[m]["content"])
        if content[b]["type"] in ("thinking",):
            continue
        content[b] = {**content[b], "cache_control": {"type": "ephemeral"}}
        marked[m] = {**marked[m], "content": content}
    system = {"type": "text", "text": pad(1100), "cache_control": {"type": "ephemeral"}}
    if n % 2:
        system["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    payload: dict[str, Any] = {"model": model, "max_tokens": 64, "system": [system]}
    payload["messages"] = marked
    if n % 4 == 0:
        payload["cache_control"] = {"type": "ephemeral"}
    return payload


@CHECK
@given(
    steps=steps,
    model=st.sampled_from(["claude-sonnet-4-6", "claude-sonnet-4-5"]),
    trusted=st.booleans(),
)
def test_anthropic_incremental_accounting_equals_a_full_recomputation(
    steps: list[Step], model: str, trusted: bool
) -> None:
    replay = Replay(claude_messages, AnthropicAccountant, AnthropicSettings)
    for n, at in replay.play(steps):
        if replay.messages:
            payload = claude_payload(replay.messages, n, model)
            replay.check(payload, anthropic, at=at, trusted=trusted)


def responses_messages(kind: str, n: int, i: int) -> list[dict[str, Any]]:
    if kind == "user":
        return [{"role": "user", "content": [{"type": "input_text", "text": pad(10 + n, f"u{i}")}]}]
    if kind in ("assistant", "thinking"):
        return [{"role": "assistant", "content": pad(10 + n, f"a{i}")}]
    call = {
        "type": "function_call",
        "call_id": f"c{i}",
        "name": "read",
        "arguments": f'{{"n":{n}}}',
    }
    output = {"type": "function_call_output", "call_id": f"c{i}", "output": pad(n % 60 + 1)}
    return [call, output]


def responses_payload(items: list[Any], n: int, model: str) -> dict[str, Any]:
    marked = list(items)
    for k in range(n % 3 if marked else 0):
        i = len(marked) - 1 - (n * (k + 1)) % len(marked)
        item = marked[i]
        if item.get("role") != "user":
            continue
        part = {**item["content"][0], "prompt_cache_breakpoint": {"mode": "explicit"}}
        if (n + k) % 2:
            part["prompt_cache_breakpoint"]["ttl"] = "12h"
        marked[i] = {**item, "content": [part]}
    developer = {"role": "developer", "content": [{"type": "input_text", "text": pad(1100)}]}
    if n % 2:
        developer["content"][0]["prompt_cache_breakpoint"] = {"mode": "explicit"}
    options: dict[str, Any] = {"mode": "explicit" if n % 5 == 0 else "implicit"}
    if n % 3 == 0:
        options["ttl"] = "12h"
    return {"model": model, "input": [developer, *marked], "prompt_cache_options": options}


@CHECK
@given(steps=steps, model=st.sampled_from(["gpt-5.6", "gpt-4.1"]), trusted=st.booleans())
def test_openai_incremental_accounting_equals_a_full_recomputation(
    steps: list[Step], model: str, trusted: bool
) -> None:
    replay = Replay(responses_messages, OpenAIAccountant, OpenAISettings)
    for n, at in replay.play(steps):
        payload = responses_payload(replay.messages, n, model)
        replay.check(payload, openai_responses, at=at, trusted=trusted, api="responses")
        chat = {"model": model, "messages": [{"role": "system", "content": pad(1100)}]}
        chat["messages"] += [{"role": "user", "content": f"q{replay.count}"}]
        replay.check(chat, openai_chat, at=at, trusted=trusted, api="chat")


def test_the_memo_stays_within_its_capacity() -> None:
    memo = ChainMemo(capacity=10)
    for i in range(1000):
        memo.put(i, i)
    assert len(memo) <= 10
    assert memo.get(999) == 999  # the newest are kept
    assert memo.get(0) is None


def test_identity_is_only_trusted_for_the_very_same_object() -> None:
    memo = ChainMemo()
    unit = {"type": "text", "text": "a"}
    memo.remember("prefix", unit, True, "seen")
    assert memo.known("prefix", unit, True) == (unit, "seen")
    assert memo.known("prefix", dict(unit), True) is None  # an equal copy is not the object
    assert memo.known("prefix", unit, False) is None  # untrusted callers never use identity
