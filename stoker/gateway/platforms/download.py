"""Reading a download within a limit: what every adapter's `fetch` shares.

A file's bytes come from outside (a platform's file server, on behalf of any user who can
write to the bot), so they are never read without a bound: a size the server states
over the limit is refused before the body is read, and a body that runs past it is cut
off there, whatever was stated.
"""

from __future__ import annotations

from collections.abc import AsyncIterable

from stoker.gateway.platforms.base import AttachmentRefused


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
