"""What a session remembers between calls, so the next call can be planned and explained."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.planner import BlockRef
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request


@dataclass(slots=True, kw_only=True)
class CacheState:
    """The previous request (for explanations), where it wrote (for the planner), the
    history hash chain and the render memo. Owned by one session; forks get a copy."""

    last_request: Request | None = None
    last_started: float | None = None
    last_written: int | None = None
    last_input_tokens: int = 0
    rolling: BlockRef | None = None
    recorded_upto: int = 0
    chain: list[str] = field(default_factory=list)
    render_memo: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> CacheState:
        return replace(
            self,
            chain=list(self.chain),
            render_memo={
                k: (n, list(items), last) for k, (n, items, last) in self.render_memo.items()
            },
        )

    def after_call(self, request: Request, record: CacheRecord) -> None:
        """Remember a finished call: the next one is planned and explained against it."""
        self.last_request = request
        self.last_started = record.started_at
        self.last_written = record.usage.written
        self.last_input_tokens = record.usage.input_total
        self.recorded_upto = len(request.messages)
        if request.breakpoints and (at := request.breakpoints[-1].message) is not None:
            self.rolling = (at, request.breakpoints[-1].block)
