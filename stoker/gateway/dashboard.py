"""`/ui`: one page, no build step. The server sends HTML with its style and script
inline; the script asks for a bearer token, saying where a user gets one (or takes it
from the URL fragment, which is never sent to a server), then polls the JSON API, shows
the selected session's conversation turn by turn (`GET /v1/sessions/{sid}`) and draws
its requests, as wide as the page allows, as SVG bars of cache read / written / uncached
tokens on a time axis (a time label only where it says something new), with each cache
entry's lifetime under them (an idle gap past the TTL is marked expired), misses and
declared breaks marked apart, and the cumulative cost as a line. Money comes from the
API's `spend` (`/v1/sessions/{sid}/usage`, `/v1/usage`): priced calls summed, unpriced
ones counted, so a missing price never blanks a total. Under the figures, the session's
cache clock (the same JSON's `warm_until`, `next_cost_now`, `next_cost_cold`, see
`stoker.agent.cache_clock`) counts down how long the prefix stays cached and says what
the next message costs now and after expiry.

The page is public (it holds no data); every data call carries the token. A content
security policy allows exactly the page's own inline script and style (by hash) and
requests to this origin.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@cache
def _page() -> tuple[str, str]:
    static = resources.files("stoker.gateway").joinpath("static")
    html = static.joinpath("dashboard.html").read_text(encoding="utf-8")
    style = static.joinpath("dashboard.css").read_text(encoding="utf-8")
    script = static.joinpath("dashboard.js").read_text(encoding="utf-8")
    policy = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return html.replace("{{STYLE}}", style).replace("{{SCRIPT}}", script), policy


async def page(request: Request) -> Response:
    body, policy = _page()
    return HTMLResponse(
        body,
        headers={
            "Content-Security-Policy": policy,
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )
