"""The attachment rules that need no platform: what counts as an image or as text, and
how a text file is shown to the model."""

from __future__ import annotations

import pytest

from stoker.platforms.attachments import file_block, is_text, text_of
from stoker.platforms.base import Attachment
from stoker.wire.blocks import image_type
from tests.images import png


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (png(2, 2), "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"GIF89a\x01\x00\x01\x00", "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"BM\x3a\x00\x00\x00", None),  # BMP: not one the providers take
        (b"<svg xmlns=", None),
        (b"", None),
    ],
)
def test_an_image_is_known_by_its_first_bytes(head: bytes, kind: str | None) -> None:
    assert image_type(head) == kind


def _file(name: str, media_type: str) -> Attachment:
    return Attachment(kind="file", name=name, media_type=media_type, size=10, ref="r")


@pytest.mark.parametrize(
    ("name", "media_type", "text"),
    [
        ("a.txt", "text/plain; charset=utf-8", True),
        ("a.json", "application/json", True),
        ("a.geojson", "application/geo+json", True),
        ("notes.md", "application/octet-stream", True),  # a type that says nothing: the name
        ("run.py", "", True),
        ("a.pdf", "application/pdf", False),
        ("a.bin", "application/octet-stream", False),
        ("notes.md", "audio/ogg", False),  # a type that says something wins over the name
    ],
)
def test_a_text_file_is_known_by_its_type_or_else_its_name(
    name: str, media_type: str, text: bool
) -> None:
    assert is_text(_file(name, media_type)) is text


def test_text_is_utf8_without_nul_and_its_byte_order_mark_is_dropped() -> None:
    assert text_of("\ufeffcafé\n".encode()) == "café\n"
    assert text_of(b"\xff\xfe") is None
    assert text_of(b"a\x00b") is None


def test_a_file_block_names_the_file_escaped() -> None:
    block = file_block('a"<b>.txt', "x < y")
    assert block.text == '<file name="a&quot;&lt;b&gt;.txt">\nx < y\n</file>'
