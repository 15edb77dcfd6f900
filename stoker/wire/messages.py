"""Messages: immutable values carrying their exact content blocks.

History is append-only: a message, once sent, is replayed as it was. Each message
computes its block fingerprints once, when first asked (a message parsed only to be read,
as the simulator parses a request's history, never pays for them), and memoizes its
rendered wire form per dialect, so rendering a long history costs only the new messages.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from stoker.errors import WireError
from stoker.wire.blocks import (
    Block,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_from_dict,
    block_to_dict,
)
from stoker.wire.canonical import canonical_json


def _block_fingerprints(content: tuple[Block, ...]) -> tuple[str, ...]:
    return tuple(hashlib.sha256(canonical_json(block_to_dict(b))).hexdigest()[:16] for b in content)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A user turn: text, images, tool results, and any volatile note, stored exactly as sent."""

    content: tuple[Block, ...]
    role: Literal["user"] = "user"
    _fingerprints: tuple[str, ...] | None = field(
        init=False, compare=False, repr=False, hash=False, default=None
    )
    wire_memo: dict[str, Any] = field(
        init=False, compare=False, repr=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if not self.content:
            raise WireError("a user message needs at least one content block")

    @property
    def block_fingerprints(self) -> tuple[str, ...]:
        """A hash of each content block, computed once."""
        if self._fingerprints is None:
            object.__setattr__(self, "_fingerprints", _block_fingerprints(self.content))
        return self._fingerprints  # type: ignore[return-value]

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def prompt(self) -> str:
        """The user's own words: the first text block (later ones are volatile notes)."""
        return next((b.text for b in self.content if isinstance(b, TextBlock)), "")


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """A model turn, exactly as the provider returned it."""

    content: tuple[Block, ...]
    stop_reason: str = "end_turn"
    id: str = ""
    # The provider family ("anthropic", "openai") of a fallback that wrote this turn; ""
    # for the session's own provider. Its thinking is sent back only to that family.
    origin: str = ""
    role: Literal["assistant"] = "assistant"
    _fingerprints: tuple[str, ...] | None = field(
        init=False, compare=False, repr=False, hash=False, default=None
    )
    wire_memo: dict[str, Any] = field(
        init=False, compare=False, repr=False, hash=False, default_factory=dict
    )

    @property
    def block_fingerprints(self) -> tuple[str, ...]:
        """A hash of each content block, computed once."""
        if self._fingerprints is None:
            object.__setattr__(self, "_fingerprints", _block_fingerprints(self.content))
        return self._fingerprints  # type: ignore[return-value]

    @property
    def tool_calls(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


Message = UserMessage | AssistantMessage


def user_text(text: str, *, note: str | None = None) -> UserMessage:
    """A user message; a volatile `note` (time, recalled memory) goes after the text."""
    blocks: list[Block] = [TextBlock(text=text)]
    if note:
        blocks.append(TextBlock(text=note))
    return UserMessage(content=tuple(blocks))


def tool_results(results: list[ToolResultBlock] | tuple[ToolResultBlock, ...]) -> UserMessage:
    """The user message that carries a batch of tool results back to the model."""
    return UserMessage(content=tuple(results))


def message_to_dict(message: Message) -> dict[str, Any]:
    """Stoker's neutral JSON form of a message (for storage and comparison)."""
    out: dict[str, Any] = {
        "role": message.role,
        "content": [block_to_dict(b) for b in message.content],
    }
    if isinstance(message, AssistantMessage):
        out["stop_reason"] = message.stop_reason
        out["id"] = message.id
        if message.origin:
            out["origin"] = message.origin
    return out


def message_from_dict(data: dict[str, Any]) -> Message:
    """Inverse of `message_to_dict`."""
    content = tuple(block_from_dict(b) for b in data.get("content", ()))
    role = data.get("role")
    if role == "user":
        return UserMessage(content=content)
    if role == "assistant":
        return AssistantMessage(
            content=content,
            stop_reason=data.get("stop_reason", "end_turn"),
            id=data.get("id", ""),
            origin=data.get("origin", ""),
        )
    raise WireError(f"unknown message role {role!r}; expected 'user' or 'assistant'")
