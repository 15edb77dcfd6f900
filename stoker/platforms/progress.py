"""What a chat sees of a turn's tool calls: one status message, edited as they go.

The first tool call of a turn posts a quiet message ("⚙ read_file"); each later start
adds a line and each end marks its line ✓ or ✗, as an edit of that one message, so a
turn of many calls is one message that changes rather than many that notify.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from stoker.platforms.base import Adapter, ChatRef, Context, MessageRef
from stoker.tools import ToolProgress

WORKING, DONE, FAILED = "⚙", "✓", "✗"


def lines_after(lines: list[str], progress: ToolProgress) -> list[str]:
    """The status lines once `progress` happened: a start adds its line, an end marks
    the latest line of that tool still working."""
    if progress.phase == "start":
        return [*lines, f"{WORKING} {progress.name}"]
    mark = FAILED if progress.is_error else DONE
    out = list(lines)
    for i in range(len(out) - 1, -1, -1):
        if out[i] == f"{WORKING} {progress.name}":
            out[i] = f"{mark} {progress.name}"
            break
    return out


@dataclass
class Status:
    """One turn's status message (`tool` is the turn's `on_tool` callback)."""

    adapter: Adapter
    ctx: Context
    chat: ChatRef
    lines: list[str] = field(default_factory=list)
    message: MessageRef | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def tool(self, progress: ToolProgress) -> None:
        self.lines = lines_after(self.lines, progress)
        text = "\n".join(self.lines)
        async with self._lock:  # edits of one message go out in order
            if self.message is None:
                self.message = await self.adapter.send(
                    self.ctx, self.chat, text, markup=False, quiet=True
                )
            else:
                await self.adapter.edit(self.ctx, self.message, text)
