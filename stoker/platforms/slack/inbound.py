"""How Slack's deliveries reach the inbox: signed HTTP routes (the Events API, the
interactivity URL, slash commands) or a Socket Mode listener.

Slack must hear a delivery arrived only once it is durably accepted. A route checks
Slack's request signature (a stale or unsigned request is a 401, and nothing is read),
hands the payload to the inbox, and only then answers 200: anything else, or no answer
within 3 s, makes Slack deliver it again with the same id, which the store drops. In
Socket Mode each envelope is acknowledged after the inbox accepted what it carries; one
that was not stays unacknowledged, and Slack sends it again. Either way Slack's legacy
verification token is taken out before anything is stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from stoker.config import DEFAULT_LIMITS
from stoker.platforms.base import Inbox
from stoker.platforms.slack.updates import public, unwrap

log = logging.getLogger(__name__)

MAX_BODY = DEFAULT_LIMITS.max_body_bytes
Listener = Callable[[AsyncBaseSocketModeClient, SocketModeRequest], Awaitable[None]]


def routes(base: str, signing_secret: str, inbox: Inbox) -> tuple[Route, ...]:
    """Events at `base`/events, button presses at `base`/actions, slash commands at
    `base`/commands, each signed with `signing_secret`."""
    verifier = SignatureVerifier(signing_secret)

    def signed(name: str, handle: Callable[[bytes], Awaitable[Response]]) -> Route:
        async def endpoint(request: Request) -> Response:
            body = await request.body()
            if len(body) > MAX_BODY:
                return Response(status_code=413)
            stamp = request.headers.get("X-Slack-Request-Timestamp", "")
            given = request.headers.get("X-Slack-Signature", "")
            if not stamp.isdigit() or not verifier.is_valid(body, stamp, given):
                return Response(status_code=401)
            return await handle(body)

        return Route(f"{base}/{name}", endpoint, methods=["POST"])

    async def events(body: bytes) -> Response:
        try:
            raw = json.loads(body)
        except ValueError:
            return Response(status_code=400)
        if not isinstance(raw, dict):
            return Response(status_code=400)
        if raw.get("type") == "url_verification":
            return JSONResponse({"challenge": str(raw.get("challenge", ""))})
        if raw.get("type") == "event_callback":
            if not isinstance(raw.get("event_id"), str) or not raw["event_id"]:
                return Response(status_code=400)
            await inbox.accept(public(raw))  # raises (a 500) when not stored: retried
        return Response(status_code=200)

    async def actions(body: bytes) -> Response:
        try:
            raw = json.loads(parse_qs(body.decode())["payload"][0])
        except (ValueError, KeyError, UnicodeDecodeError):
            return Response(status_code=400)
        if not isinstance(raw, dict):
            return Response(status_code=400)
        if raw.get("type") == "block_actions":  # other interactions are not ours
            await inbox.accept(public(raw))
        return Response(status_code=200)

    async def commands(body: bytes) -> Response:
        try:
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        except UnicodeDecodeError:
            return Response(status_code=400)
        await inbox.accept(public({**form, "type": "slash_command"}))
        return Response(status_code=200)  # an empty 200: the answer comes as a message

    return (
        signed("events", events),
        signed("actions", actions),
        signed("commands", commands),
    )


def listener(inbox: Inbox) -> Listener:
    """Socket Mode: each envelope acknowledged once the inbox accepted what it carries."""

    async def on_request(client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        raw = unwrap(req.type, req.payload)
        if raw is not None:
            try:
                await inbox.accept(public(raw))
            except Exception as exc:
                log.warning("slack: envelope %s not accepted: %r", req.envelope_id, exc)
                return
        await client.send_socket_mode_response(SocketModeResponse(req.envelope_id))

    return on_request
