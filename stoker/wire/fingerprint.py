"""Per-slot fingerprints of a request: params, each tool, system, and the history.

A record keeps the block fingerprints of only the messages that are new since the
lineage's previous call, plus a hash chain over the whole history, so a record costs
O(new messages) however long the conversation is, and two records still tell whether
the later one extends the earlier (compare chains) and which block moved (compare the
new blocks). Message block hashes are computed once, when a message is built.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stoker.wire.messages import Message
from stoker.wire.prefix import Prefix
from stoker.wire.request import Request

EMPTY_CHAIN = "0" * 16


def chain_step(previous: str, message: Message) -> str:
    """The history hash after appending `message` to a history whose hash is `previous`."""
    data = "|".join((previous, message.role, *message.block_fingerprints)).encode()
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotFingerprints:
    params: str
    tools: tuple[str, ...]
    system: str
    history: str  # chain hash over every message sent
    message_count: int
    new_from: int  # index of the first message in `new_messages`
    new_messages: tuple[tuple[str, ...], ...]

    @property
    def prefix_key(self) -> str:
        """Which prefix the call sent (see `prefix_key`)."""
        return prefix_key(self.params, self.tools, self.system)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "tools": list(self.tools),
            "system": self.system,
            "history": self.history,
            "message_count": self.message_count,
            "new_from": self.new_from,
            "new_messages": [list(m) for m in self.new_messages],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SlotFingerprints:
        return cls(
            params=data["params"],
            tools=tuple(data["tools"]),
            system=data["system"],
            history=data["history"],
            message_count=data["message_count"],
            new_from=data["new_from"],
            new_messages=tuple(tuple(m) for m in data["new_messages"]),
        )


def prefix_key(params: str, tools: Sequence[str], system: str) -> str:
    """One key for a prefix from its slot fingerprints: calls with equal keys share their
    cache keys message for message, so where one wrote another can read."""
    return hashlib.sha256("|".join([params, *tools, system]).encode()).hexdigest()[:16]


def key_of(prefix: Prefix) -> str:
    """`prefix_key` of a prefix."""
    return prefix_key(
        prefix.params_fingerprint, prefix.tool_fingerprints, prefix.system_fingerprint
    )


def fingerprints(request: Request, *, history: str, new_from: int) -> SlotFingerprints:
    """Fingerprints of `request`; `history` is the chain hash of its messages."""
    prefix = request.prefix
    new_from = min(new_from, len(request.messages))
    return SlotFingerprints(
        params=prefix.params_fingerprint,
        tools=prefix.tool_fingerprints,
        system=prefix.system_fingerprint,
        history=history,
        message_count=len(request.messages),
        new_from=new_from,
        new_messages=tuple(m.block_fingerprints for m in request.messages[new_from:]),
    )
