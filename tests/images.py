"""Real image bytes for the platform tests, made here: a PNG of any size (stdlib only)."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png(width: int, height: int, *, shade: int = 0) -> bytes:
    """A valid RGB PNG of `width` x `height` pixels, a gradient moved by `shade` (so two
    images of one size differ)."""
    rows = b"".join(
        b"\x00"
        + b"".join(bytes(((x + shade) % 256, (y * 3) % 256, (x ^ y) % 256)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows))
        + _chunk(b"IEND", b"")
    )
