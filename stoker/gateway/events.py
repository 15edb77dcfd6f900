"""`GET /v1/sessions/{sid}/events`: a session's stored events, as JSON or followed live.

Every event comes from the store, so any replica answers while the session's turn runs on
another one (a load balancer without affinity sends the reader anywhere). As JSON it is a
page: events after `?after=N`, at most `?limit=`. As Server-Sent Events (`?stream=true` or
`Accept: text/event-stream`) it follows the log: each event is a frame whose `id` is its
number, new ones are polled from the store, and a client that reconnects with
`Last-Event-ID` continues where it stopped. A stream ends after `?timeout=` seconds (25
by default, so a draining replica is not held open past its grace) with an `end` frame;
the client reconnects. An unreachable store ends it with an `error` frame.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from stoker.errors import StokerError
from stoker.gateway.errors import BadRequest, as_gateway_error
from stoker.gateway.http import app_state, query_int, user_of, wants_stream
from stoker.gateway.service import Gateway
from stoker.gateway.sse import HEADERS, encode

POLL_SECONDS = 0.25  # how often a followed stream looks for new events
PAGE = 500


def _after(request: Request) -> int:
    """Where to start: `?after=`, else the `Last-Event-ID` a reconnecting client sends."""
    resumed = request.headers.get("last-event-id")
    if "after" in request.query_params or resumed is None:
        return query_int(request, "after", default=0, low=0, high=2**31 - 1)
    if not (resumed.isascii() and resumed.isdigit() and len(resumed) <= 10):
        raise BadRequest("Last-Event-ID must be an event number")
    return int(resumed)


async def session_events(request: Request) -> Response:
    user, sid = user_of(request), request.path_params["sid"]
    gateway = app_state(request).gateway
    after = _after(request)
    if not wants_stream(request):
        limit = query_int(request, "limit", default=PAGE, low=1, high=PAGE)
        events = await gateway.events(user, sid, after=after, limit=limit)
        return JSONResponse({"events": events})
    timeout = query_int(request, "timeout", default=25, low=1, high=300)
    first = await gateway.events(user, sid, after=after, limit=PAGE)  # 404 before 200
    frames = _follow(gateway, user, sid, first, after, time.monotonic() + timeout)
    return StreamingResponse(frames, media_type="text/event-stream", headers=HEADERS)


async def _follow(
    gateway: Gateway,
    user: str,
    sid: str,
    events: list[dict[str, object]],
    after: int,
    deadline: float,
) -> AsyncIterator[bytes]:
    while True:
        for event in events:
            after = int(str(event["seq"]))
            yield f"id: {after}\n".encode() + encode(str(event["type"]), event)
        if time.monotonic() >= deadline:
            yield encode("end", {"after": after})
            return
        if not events:
            await asyncio.sleep(POLL_SECONDS)
        try:
            events = await gateway.events(user, sid, after=after, limit=PAGE)
        except StokerError as exc:  # the store went away, or the session was deleted
            yield encode("error", as_gateway_error(exc).body())
            return
