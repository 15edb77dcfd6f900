"""An answer cut to what the request allows: its stop sequences and its output limit.

A real model stops generating at the first stop sequence or when its output budget runs
out, whichever comes first, and says which (`stop_sequence`, `max_tokens`). The simulator
gets a whole answer from its model and cuts it the same way, token by token with the
model's own tokenizer, so `max_tokens: 3` returns three tokens and says it was cut.
Hidden reasoning (OpenAI reasoning models) is spent first and counts against the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from stoker.providers.sim.asks import Ask
from stoker.wire.blocks import Block, TextBlock, ThinkingBlock, ToolUseBlock
from stoker.wire.messages import AssistantMessage
from stoker.wire.usage import Usage

# What a simulated reasoning model thinks before every answer (its summary, when one is
# asked for): deterministic, and honest about being no reasoning at all.
REASONING = "Reading the request, then answering it."


class Tokens(Protocol):
    """How the simulator counts and cuts output text: the model's tokenizer
    (`stoker.cache.tokens.tokenizer_for`), whose pieces are bytes (a BPE token may end
    inside a character)."""

    def count(self, text: str) -> int: ...

    def pieces(self, text: str) -> list[bytes]: ...


def head(text: str, n: int, tokens: Tokens) -> str:
    """The first `n` tokens of `text` (a character cut between two tokens is left out)."""
    return b"".join(tokens.pieces(text)[:n]).decode("utf-8", "ignore")


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the model returns: its blocks, why it stopped, and what it cost in output.

    `stop` is Anthropic's vocabulary (`end_turn`, `tool_use`, `max_tokens`,
    `stop_sequence`); each API maps it to its own. `output_tokens` includes the
    `reasoning_tokens` spent before the visible output."""

    content: tuple[Block, ...]
    stop: str
    output_tokens: int
    stop_sequence: str | None = None
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What each API renders its response from: the message as the client will read it,
    the answer it came from, the call's usage, what was asked, and when."""

    message: AssistantMessage
    answer: Answer
    usage: Usage
    ask: Ask
    model: str
    created: int
    tokens: Tokens


def _cost(block: Block, tokens: Tokens) -> int:
    if isinstance(block, TextBlock):
        return tokens.count(block.text)
    if isinstance(block, ThinkingBlock):
        return tokens.count(block.thinking)
    if isinstance(block, ToolUseBlock):
        return tokens.count(block.name) + tokens.count(block.input_json)
    return 0


def _first_stop(text: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    found = [(text.find(s), s) for s in stops if s in text]
    return min(found) if found else None


def shape(blocks: tuple[Block, ...], ask: Ask, tokens: Tokens) -> Answer:
    """`blocks` as the request lets them out: cut at the first stop sequence in their
    text, or where the output limit runs out, whichever the model would reach first."""
    reasoning = tokens.count(REASONING) if ask.reasoning else 0
    budget = ask.max_tokens
    if budget is not None and reasoning >= budget:  # the limit ran out while reasoning
        return Answer(content=(), stop="max_tokens", output_tokens=budget, reasoning_tokens=budget)
    left = None if budget is None else budget - reasoning
    kept: list[Block] = []
    spent = reasoning
    for block in blocks:
        cost = _cost(block, tokens)
        if isinstance(block, TextBlock) and ask.stop:
            found = _first_stop(block.text, ask.stop)
            if found is not None:
                before = block.text[: found[0]]
                need = tokens.count(before)
                if left is None or need <= left:
                    if before:
                        kept.append(TextBlock(text=before))
                    return Answer(
                        content=tuple(kept),
                        stop="stop_sequence",
                        stop_sequence=found[1],
                        output_tokens=spent + need,
                        reasoning_tokens=reasoning,
                    )
        if left is not None and cost > left:
            cut = _cut(block, left, tokens)
            if cut is not None:
                kept.append(cut)
            return Answer(
                content=tuple(kept),
                stop="max_tokens",
                output_tokens=budget if budget is not None else spent,
                reasoning_tokens=reasoning,
            )
        kept.append(block)
        spent += cost
        if left is not None:
            left -= cost
    stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in kept) else "end_turn"
    return Answer(
        content=tuple(kept),
        stop=stop,
        output_tokens=max(spent, 1),
        reasoning_tokens=reasoning,
    )


def _cut(block: Block, left: int, tokens: Tokens) -> Block | None:
    """The part of `block` that fits in `left` tokens: text and thinking are cut between
    tokens; a tool call that does not fit whole is not made."""
    if left <= 0:
        return None
    if isinstance(block, TextBlock):
        return TextBlock(text=head(block.text, left, tokens))
    if isinstance(block, ThinkingBlock):
        return ThinkingBlock(thinking=head(block.thinking, left, tokens), signature=block.signature)
    return None
