"""One call the recording proxy forwarded, as the store keeps it.

The proxy (`stoker.proxy`) makes these and the store persists them without knowing how
they were made, as it does with cache records. A client's API key never appears here:
`tenant` is a digest of it, enough to tell two clients apart and nothing more.

`request` holds the client's body with the leading messages it shares with the previous
call of its lineage left out (`messages_from` says how many), so a long conversation
costs what each call added, not the whole history again on every row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stoker.wire.record import CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """A request the proxy forwarded (or sent itself, a keep-warm) and what came back.

    `rewrites` lists what optimize mode changed in the request; `cannot_fix` what it saw
    and could not change without changing what the model reads (slot and cost); `ideal`
    the input tokens this call was the first of its tenant to send (what an ideal run
    writes once) and `sent_before` the input of the longest earlier call it extends (what
    it could have read), both in the provider's own count; `error` why the call has no
    record (a body the dialect cannot read, an upstream failure).
    """

    lineage_id: str
    seq: int
    tenant: str
    dialect: str
    path: str
    mode: str  # "audit" or "optimize"
    started_at: float
    duration: float
    status: int
    stream: bool = False
    parent_id: str | None = None
    purpose: str = "turn"  # "turn", or a keep-warm the proxy sent: "ping" or "seal"
    model: str = ""
    title: str = ""
    messages_from: int = 0
    request: dict[str, Any] = field(default_factory=dict)
    response: dict[str, Any] | None = None
    record: CacheRecord | None = None
    rewrites: tuple[str, ...] = ()
    cannot_fix: tuple[str, ...] = ()
    ideal: int = 0
    sent_before: int = 0
    error: str | None = None

    def notes_json(self) -> str:
        notes = {"rewrites": list(self.rewrites), "cannot_fix": list(self.cannot_fix)}
        return json.dumps(
            {**notes, "sent_before": self.sent_before},
            ensure_ascii=False,
            separators=(",", ":"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageSummary:
    """One lineage of proxied calls: a conversation, told apart by its hash chain."""

    id: str
    parent_id: str | None
    tenant: str
    dialect: str
    model: str
    created_at: float
    updated_at: float
    calls: int
    title: str
