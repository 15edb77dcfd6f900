"""Reading a download within a limit: what every adapter's `fetch` shares.

A file's bytes come from outside (a platform's file server, on behalf of any user who can
write to the bot), so they are never read without a bound: a size the server states
over the limit is refused before the body is read, and a body that runs past it is cut
off there, whatever was stated.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping
from urllib.parse import urlsplit

import aiohttp

from stoker.platforms.base import AttachmentRefused

TIMEOUT = aiohttp.ClientTimeout(total=60.0)  # one file
CHUNK = 65_536


def size(n: int) -> str:
    """A byte count as a person reads it: "3.9 MB", "12 kB"."""
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{max(1, round(n / 1000))} kB"


def too_large(n: int | None, limit: int) -> AttachmentRefused:
    shown = f"{size(n)}, " if n else ""
    return AttachmentRefused(f"{shown}over the {size(limit)} limit")


async def read_within(chunks: AsyncIterable[bytes], limit: int, *, stated: int | None) -> bytes:
    """The body of a download, or `AttachmentRefused` once it is over `limit` bytes (at
    once when the `stated` length is), the rest left unread."""
    if stated is not None and stated > limit:
        raise too_large(stated, limit)
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise too_large(stated, limit)
    return bytes(body)


def on_hosts(url: str, api_url: str, platform: Callable[[str], bool]) -> bool:
    """Whether `url` is on the platform's own hosts (https, a host `platform` accepts) or
    the configured API's (a test's fake, a proxy): the only places a download goes."""
    target, api = urlsplit(url), urlsplit(api_url)
    if target.scheme == api.scheme and target.netloc == api.netloc:
        return True
    return target.scheme == "https" and platform(target.hostname or "")


async def get_within(
    session: aiohttp.ClientSession,
    url: str,
    limit: int,
    *,
    who: str,
    refusals: Mapping[int, str],
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """A platform file server's download of `url`, within `limit` bytes, never through
    a redirect. A 5xx is passing (`ConnectionError`: tried again later); a status in
    `refusals` is refused with its reason; any other but 200 is refused naming it."""
    async with session.get(
        url, headers=headers, allow_redirects=False, timeout=TIMEOUT
    ) as response:
        if response.status >= 500:
            raise ConnectionError(f"{who}'s file server answered {response.status}")
        if response.status in refusals:
            raise AttachmentRefused(refusals[response.status])
        if response.status != 200:
            raise AttachmentRefused(f"{who} refused the download ({response.status})")
        return await read_within(
            response.content.iter_chunked(CHUNK), limit, stated=response.content_length
        )
