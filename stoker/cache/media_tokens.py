"""Tokens of images and documents, by the providers' documented rules.

The rules and their sources are in docs/provider-caching.md, "Token counts". An image's
size comes from its header (PNG, JPEG, GIF, WebP; no image library), a PDF's page count
from its page objects; a URL or file id is never fetched, so what cannot be read counts
a fixed, documented estimate. The bytes may be hostile: every parse here does bounded
work (a fixed number of JPEG segments, of PDF object streams and of decompressed bytes)
and answers None rather than raising.
"""

from __future__ import annotations

import binascii
import math
import re
import zlib
from collections.abc import Iterator
from functools import lru_cache

# Anthropic [doc]: an image costs about width * height / 750 tokens, after a resize that
# keeps the long edge within 1,568 px and the area within about 1.15 megapixels.
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_LONG_EDGE = 1568
ANTHROPIC_MAX_PIXELS = 1_150_000
# Anthropic [doc]: a PDF page costs its extracted text ("1,500-3,000 tokens per page",
# the low end taken) plus the page as an image; both APIs take at most 100 pages.
PDF_TEXT_PER_PAGE = 1500
MAX_PDF_PAGES = 100
# OpenAI [doc], gpt-4o / 4.1 / 5 families: `detail: low` is 85 tokens; otherwise fit in
# 2,048 x 2,048, shrink so the short side is at most 768, and pay 170 per 512-px tile
# plus 85.
OPENAI_BASE = 85
OPENAI_TILE = 170
OPENAI_FIT = 2048
OPENAI_SHORT_SIDE = 768
OPENAI_TILE_SIDE = 512

# The most base64 read from one image or file: past every request size limit (32 MB).
MAX_BASE64 = 48 * 1024 * 1024
_MAX_JPEG_SEGMENTS = 4096
_MAX_OBJECT_STREAMS = 256
_MAX_INFLATED = 16 * 1024 * 1024

Size = tuple[int, int]


def anthropic_image(size: Size | None) -> int:
    """Tokens of an image on Anthropic; of one at the resize limit when the size is
    unknown (a URL, a file id, bytes that are no image): what a photo or screenshot costs."""
    width, height = size or (ANTHROPIC_LONG_EDGE * 10, ANTHROPIC_LONG_EDGE * 10)
    scale = min(
        1.0,
        ANTHROPIC_LONG_EDGE / max(width, height),
        math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)),
    )
    if scale < 1.0:
        width, height = max(1, int(width * scale)), max(1, int(height * scale))
    return max(1, math.ceil(width * height / ANTHROPIC_PIXELS_PER_TOKEN))


def anthropic_pdf(pages: int | None) -> int:
    """Tokens of a PDF on Anthropic: per page, its text and its image; one page when the
    count is unknown [inferred]."""
    return _pages(pages) * (PDF_TEXT_PER_PAGE + anthropic_image(None))


def openai_image(size: Size | None, detail: str = "auto") -> int:
    """Tokens of an image on OpenAI (tile rule). `auto` counts as `high`; an unknown size
    as an image of at least 768 px, square or 4:3: four tiles."""
    if detail == "low":
        return OPENAI_BASE
    if size is None:
        return OPENAI_BASE + 4 * OPENAI_TILE
    width, height = size
    if max(width, height) > OPENAI_FIT:
        longest = max(width, height)
        width, height = width * OPENAI_FIT // longest, height * OPENAI_FIT // longest
    if min(width, height) > OPENAI_SHORT_SIDE:
        shortest = min(width, height)
        width = width * OPENAI_SHORT_SIDE // shortest
        height = height * OPENAI_SHORT_SIDE // shortest
    tiles = -(-max(width, 1) // OPENAI_TILE_SIDE) * -(-max(height, 1) // OPENAI_TILE_SIDE)
    return OPENAI_BASE + OPENAI_TILE * tiles


def openai_pdf(pages: int | None) -> int:
    """Tokens of a PDF on OpenAI, which gives the model each page's text and image:
    per page the text estimate and a page image of four tiles; one page when unknown."""
    return _pages(pages) * (PDF_TEXT_PER_PAGE + openai_image(None))


def _pages(pages: int | None) -> int:
    return min(max(pages or 1, 1), MAX_PDF_PAGES)


_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]")
_URL_SAFE = bytes.maketrans(b"-_", b"+/")


def b64_bytes(text: str, limit: int = MAX_BASE64) -> bytes:
    """The bytes of base64 `text` (at most `limit` characters of it), leniently: line
    breaks, padding and stray characters are dropped, a dangling character ignored."""
    raw = _NOT_BASE64.sub(b"", text[:limit].encode("ascii", "ignore").translate(_URL_SAFE))
    tail = len(raw) % 4
    raw = raw[: len(raw) - 1] if tail == 1 else raw + b"=" * ((4 - tail) % 4)
    try:
        return binascii.a2b_base64(raw)
    except (binascii.Error, ValueError):
        return b""


# An image's size is in its first bytes: PNG, GIF and WebP in 30, JPEG's frame header
# after its metadata. A JPEG whose metadata runs past this is a camera photo: over the
# resize limit anyway, so "unknown" costs what it would.
IMAGE_HEAD = 256 * 1024


@lru_cache(maxsize=256)
def base64_image_size(text: str) -> Size | None:
    """`image_size` of base64 `text`, from its first `IMAGE_HEAD` characters. Cached: the
    same image is counted again on every turn of a conversation."""
    return image_size(b64_bytes(text, IMAGE_HEAD))


@lru_cache(maxsize=64)
def base64_pdf_pages(text: str) -> int | None:
    """`pdf_pages` of base64 `text`. Cached like `base64_image_size`."""
    return pdf_pages(b64_bytes(text))


def data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 text) of a `data:<type>;base64,<data>` URL; None otherwise."""
    if not url.startswith("data:"):
        return None
    head, comma, _ = url[5 : 5 + 256].partition(",")
    if not comma or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")].split(";")[0].strip().lower(), url[5 + len(head) + 1 :]


def image_size(data: bytes) -> Size | None:
    """Width and height from a PNG, GIF, WebP or JPEG header; None for anything else."""
    size: Size | None = None
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        size = (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
    elif data[:6] in (b"GIF87a", b"GIF89a"):
        size = (int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little"))
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        size = _webp_size(data)
    elif data.startswith(b"\xff\xd8"):
        size = _jpeg_size(data)
    if size is None or len(data) < 10 or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _webp_size(data: bytes) -> Size | None:
    chunk, body = data[12:16], data[20:30]
    if len(body) < 10:
        return None
    if chunk == b"VP8 " and body[3:6] == b"\x9d\x01\x2a":
        width = int.from_bytes(body[6:8], "little") & 0x3FFF
        return (width, int.from_bytes(body[8:10], "little") & 0x3FFF)
    if chunk == b"VP8L" and body[0] == 0x2F:
        b1, b2, b3, b4 = body[1:5]
        return (1 + (((b2 & 0x3F) << 8) | b1), 1 + (((b4 & 0x0F) << 10) | (b3 << 2) | (b2 >> 6)))
    if chunk == b"VP8X":
        return (1 + int.from_bytes(body[4:7], "little"), 1 + int.from_bytes(body[7:10], "little"))
    return None


# Start-of-frame markers: every SOFn except DHT (C4), JPG (C8) and DAC (CC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


def _jpeg_size(data: bytes) -> Size | None:
    """Walk the segments to the first start-of-frame, at most `_MAX_JPEG_SEGMENTS` of them."""
    at = 2
    for _ in range(_MAX_JPEG_SEGMENTS):
        if at + 1 >= len(data) or data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _STANDALONE:
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, or the scan, before any frame
            return None
        if marker in _SOF:
            frame = data[at + 5 : at + 9]
            if len(frame) < 4:
                return None
            return (int.from_bytes(frame[2:4], "big"), int.from_bytes(frame[0:2], "big"))
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


_PAGE = re.compile(rb"/Type[\x00\t\n\f\r ]*/Page(?![A-Za-z0-9])")
_OBJECT_STREAM = re.compile(rb"/Type[\x00\t\n\f\r ]*/ObjStm")
_STREAM = re.compile(rb"stream\r?\n")


def pdf_pages(data: bytes) -> int | None:
    """Pages of a PDF: its page objects, counted up to `MAX_PDF_PAGES` (plain, then inside
    Flate object streams, where PDF 1.5 writers put them); None when it has none."""
    if b"%PDF" not in data[:1024]:
        return None
    pages = _count(data, MAX_PDF_PAGES)
    if pages == 0:
        for inflated in _object_streams(data):
            pages += _count(inflated, MAX_PDF_PAGES - pages)
            if pages >= MAX_PDF_PAGES:
                break
    return pages or None


def _count(data: bytes, most: int) -> int:
    n = 0
    for _ in _PAGE.finditer(data):
        n += 1
        if n >= most:
            break
    return n


def _object_streams(data: bytes) -> Iterator[bytes]:
    """The inflated content of the first `_MAX_OBJECT_STREAMS` Flate object streams, at
    most `_MAX_INFLATED` bytes in all."""
    budget = _MAX_INFLATED
    for n, match in enumerate(_OBJECT_STREAM.finditer(data)):
        if n >= _MAX_OBJECT_STREAMS or budget <= 0:
            return
        stream = _STREAM.search(data, match.end(), match.end() + 4096)
        if stream is None:
            continue
        if b"/FlateDecode" not in data[max(0, match.start() - 512) : stream.start()]:
            continue
        inflater = zlib.decompressobj()
        try:
            out = inflater.decompress(data[stream.end() : stream.end() + budget], budget)
        except zlib.error:
            continue
        budget -= len(out)
        yield out
