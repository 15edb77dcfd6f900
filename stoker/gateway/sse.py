"""Server-Sent Events: a turn's callbacks, turned into a stream of events.

The turn runs as a gateway task, not inside the response: a client that disconnects
mid-stream does not cancel a turn whose user message is already stored (the next
message would otherwise find half a turn). Events: `text` (a delta), `tool` (a call
starting or ending), `status`, `approval` (a risky call waiting for its answer, see
`stoker.gateway.approvals`), then `done` with the reply, or `error`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from stoker.agent.seams import Callbacks
from stoker.errors import StokerError
from stoker.gateway.approvals import Show
from stoker.gateway.errors import GatewayError, as_gateway_error
from stoker.gateway.views import Reply

if TYPE_CHECKING:
    from stoker.gateway.service import Gateway
    from stoker.tools import Approver, ToolProgress

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def encode(event: str | None, data: Any) -> bytes:
    """One SSE frame; `event` None for OpenAI-style frames that carry only data."""
    body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {body}\n\n".encode()


async def turn_events(
    gateway: Gateway,
    start: Callable[[Callbacks], Coroutine[Any, Any, Reply]],
    *,
    approver: Callable[[Show], Approver] | None = None,
) -> AsyncIterator[Event]:
    """Events of the turn `start(callbacks)` runs, ending with `done` or `error`.
    `approver(show)` makes the turn's approver, which shows each question on the stream.

    Returns once the turn has produced its first event. A turn that fails before that
    (a bad or empty message, an unknown command, a session that is not there) raises
    here, before any response is sent, so the client gets its 4xx instead of a 200
    stream that holds only an error.
    """
    queue: asyncio.Queue[Event | None] = asyncio.Queue()

    def tool(p: ToolProgress) -> None:
        queue.put_nowait(
            ("tool", {"name": p.name, "id": p.tool_use_id, "phase": p.phase, "error": p.is_error})
        )

    callbacks = Callbacks(
        on_text=lambda delta: queue.put_nowait(("text", {"delta": delta})),
        on_tool=tool,
        on_status=lambda status: queue.put_nowait(("status", {"status": status})),
        approver=approver(lambda data: queue.put_nowait(("approval", data))) if approver else None,
    )
    task = gateway.spawn(start(callbacks))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    first = await queue.get()
    if first is None:
        task.result()  # raises what the turn raised
    return _events(first, queue, task)


async def _events(
    first: Event | None, queue: asyncio.Queue[Event | None], task: asyncio.Task[Reply]
) -> AsyncIterator[Event]:
    item = first
    while item is not None:
        yield item
        item = await queue.get()
    try:
        reply = task.result()
    except StokerError as exc:
        yield ("error", as_gateway_error(exc).body())
        return
    except Exception:
        log.exception("a streamed message failed")
        yield ("error", GatewayError("internal error").body())
        return
    yield ("done", reply.to_dict())
