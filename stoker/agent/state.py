"""What a lineage remembers between calls, so the next call can be planned and explained."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.planner import BlockRef
from stoker.wire.request import Request


@dataclass(slots=True, kw_only=True)
class CacheState:
    """What a lineage remembers between calls: the previous request (for explanations),
    where it wrote (for the planner), the history hash chain and the render memo."""

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
