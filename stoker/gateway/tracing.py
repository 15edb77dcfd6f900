"""Trace context from the caller: a request's `traceparent` parents the turns it runs.

A client that traces its own work sends W3C trace context headers (`traceparent`,
`tracestate`, `baggage`); this ASGI middleware hands them to the gateway's telemetry for
the length of the request, so the turn spans a message starts (and the sub-agents, reviews
and provider calls under them) join the caller's trace. Streams run in tasks started
inside the request, which copy the context. With telemetry off it changes nothing.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from stoker.agent.telemetry import Telemetry

CARRIED = (b"traceparent", b"tracestate", b"baggage")


class TraceContext:
    def __init__(self, app: ASGIApp, *, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        carried = {}
        if scope["type"] == "http":
            carried = {
                name.decode("latin-1"): value.decode("latin-1")
                for name, value in scope["headers"]
                if name.lower() in CARRIED
            }
        if not carried:
            await self.app(scope, receive, send)
            return
        with self.telemetry.attached(carried):
            await self.app(scope, receive, send)
