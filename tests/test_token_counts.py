"""Token counts: OpenAI's exact encodings and chat format, the media rules of both
providers, and the bounds on hostile bytes (docs/provider-caching.md, "Token counts").

Every figure marked [doc] is one the provider (or its cookbook) published."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import time
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.cache import media_tokens as media
from stoker.cache.accounting import OpenAIAccountant
from stoker.cache.accounting._anthropic_render import block_tokens
from stoker.cache.accounting._openai_render import render
from stoker.cache.models import known_models, model_info
from stoker.cache.tokens import (
    Bpe,
    _splits_at,
    count_tokens,
    estimate_tokens,
    tokenizer_for,
    tokenizer_named,
)
from stoker.wire.blocks import DocumentBlock, ImageBlock, ImageRefBlock, TextBlock
from stoker.wire.dialects._chain import ChainMemo
from tests.images import png

ENCODINGS = ("o200k_base", "cl100k_base")


# --- encodings ----------------------------------------------------------------------

# [doc] The cookbook's token bytes for "お誕生日おめでとう": pieces may split a character.
JAPANESE_CL100K_HEAD = [b"\xe3\x81\x8a", b"\xe8\xaa", b"\x95", b"\xe7\x94\x9f", b"\xe6\x97\xa5"]
JAPANESE_O200K_HEAD = [b"\xe3\x81\x8a", b"\xe8\xaa", b"\x95", b"\xe7\x94\x9f\xe6\x97\xa5"]
JAPANESE_TAIL = [b"\xe3\x81\x8a", b"\xe3\x82\x81", b"\xe3\x81\xa7", b"\xe3\x81\xa8\xe3\x81\x86"]


@pytest.mark.parametrize(
    ("encoding", "text", "pieces"),
    [
        # [doc] OpenAI cookbook, "How to count tokens with tiktoken", compare_encodings.
        ("cl100k_base", "tiktoken is great!", [b"t", b"ik", b"token", b" is", b" great", b"!"]),
        ("o200k_base", "tiktoken is great!", [b"t", b"ikt", b"oken", b" is", b" great", b"!"]),
        (
            "cl100k_base",
            "お誕生日おめでとう",
            [*JAPANESE_CL100K_HEAD, *JAPANESE_TAIL],
        ),
        (
            "o200k_base",
            "お誕生日おめでとう",
            [*JAPANESE_O200K_HEAD, *JAPANESE_TAIL],
        ),
        ("o200k_base", " x" * 5, [b" x"] * 5),  # what the test helpers build sizes from
        ("cl100k_base", "hello world", [b"hello", b" world"]),
    ],
)
def test_encodings_split_as_tiktoken_does(encoding: str, text: str, pieces: list[bytes]) -> None:
    tok = tokenizer_named(encoding)
    assert (tok.count(text), tok.pieces(text)) == (len(pieces), pieces)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_special_token_text_counts_as_the_text_it_is(encoding: str) -> None:
    tok = tokenizer_named(encoding)
    assert tok.count("<|endoftext|>") == len(tok.pieces("<|endoftext|>")) > 1


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), encoding=st.sampled_from(ENCODINGS))
def test_pieces_join_back_to_the_exact_bytes(text: str, encoding: str) -> None:
    tok = tokenizer_named(encoding)
    pieces = tok.pieces(text)
    assert b"".join(pieces) == text.encode("utf-8")
    assert len(pieces) == tok.count(text)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_lone_surrogates_are_pieces_of_their_own(encoding: str) -> None:
    tok = tokenizer_named(encoding)
    text = "a\ud800b c\udfff"
    assert b"".join(tok.pieces(text)) == text.encode("utf-8", "surrogatepass")
    assert tok.count(text) == len(tok.pieces(text)) == tok.count("a") + 1 + tok.count("b c") + 1


_WORDS = ["the", "Quick", "x", "DON'T", "'s", "é", "e\u0301", "ǅ", "日本", "ß", "7", "123", "½"]
_SPLIT_ALPHABET = st.sampled_from(
    [*_WORDS, " ", "  ", "\n", "\n\n", "\r\n", "\t", ".", ",", "!?", "—", "=", "/"]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_SPLIT_ALPHABET, max_size=40), encoding=st.sampled_from(ENCODINGS))
def test_long_texts_are_cut_only_where_the_encoding_splits_anyway(
    parts: list[str], encoding: str
) -> None:
    text = "".join(parts)
    tok = tokenizer_named(encoding)
    whole = tok.pieces(text)
    for at in range(1, len(text)):
        if _splits_at(text, at):
            assert tok.pieces(text[:at]) + tok.pieces(text[at:]) == whole, at


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_text_longer_than_a_chunk_counts_as_one_text(encoding: str) -> None:
    line = "Token 42 counts: the quick brown fox, 7x faster\n"
    text = line * 3000  # 150,000 characters, cut into chunks of 40,000
    chunked, whole = Bpe(encoding), Bpe(encoding, chunk=10**7)
    assert chunked.count(text) == whole.count(text) > 0
    assert b"".join(chunked.pieces(text)) == text.encode()


def test_a_hostile_text_is_counted_in_bounded_time() -> None:
    tok = tokenizer_named("o200k_base")
    started = time.perf_counter()
    assert tok.count("A" * 3_000_000) > 0  # no place to cut: cut anyway, off by a few
    assert tok.count("日" * 500_000) > 0  # several tokens a character, over the chunk limit
    assert time.perf_counter() - started < 20.0


def test_the_estimate_keeps_x_space_at_one_token_each() -> None:
    assert count_tokens("x " * 1234) == 1234
    assert tokenizer_named("estimate").count("x " * 7) == 7


def test_models_name_their_tokenizer() -> None:
    for name in known_models():
        info = model_info(name)
        expected = "o200k_base" if info.provider == "openai" else "estimate"
        assert tokenizer_for(info).name == expected, name
    with pytest.raises(ValueError, match="unknown tokenizer"):
        tokenizer_named("p50k_base")


def test_an_encoding_is_loaded_only_when_openai_tokens_are_counted() -> None:
    code = (
        "import sys\n"
        "from stoker.cache.accounting import AnthropicAccountant\n"
        "from stoker.providers.sim.engine import SimEngine\n"
        "from tests.accounting_helpers import body, text, user\n"
        "AnthropicAccountant().account(body(user(text(50))), at=0.0)\n"
        "assert 'bpe_openai' not in sys.modules\n"
        "from stoker.cache.tokens import tokenizer_named\n"
        "tokenizer_named('o200k_base').count('hi')\n"
        "assert 'bpe_openai' in sys.modules\n"
    )
    env = {**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:stoker"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


# --- OpenAI's chat format -------------------------------------------------------------


def chat_tokens(payload: dict[str, Any]) -> int:
    return (
        OpenAIAccountant()
        .account({"model": "gpt-4.1", **payload}, api="chat", at=0.0)
        .usage.input_total
    )


def responses_tokens(payload: dict[str, Any]) -> int:
    outcome = OpenAIAccountant().account({"model": "gpt-5.6", **payload}, api="responses", at=0.0)
    return outcome.usage.input_total


def test_messages_count_as_the_api_counted_them() -> None:
    """[doc] The cookbook's example conversation: 124 prompt tokens on gpt-4o (o200k_base),
    by the API and by its per-message rule."""
    messages = [
        {
            "role": "system",
            "content": "You are a helpful, pattern-following assistant that translates "
            "corporate jargon into plain English.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "New synergies will help drive top-line growth.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Things working well together will increase revenue.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "Let's circle back when we have more bandwidth to touch base on "
            "opportunities for increased leverage.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Let's talk later when we're less busy about how to do better.",
        },
        {
            "role": "user",
            "content": "This late pivot means we don't have time to boil the ocean for the "
            "client deliverable.",
        },
    ]
    assert chat_tokens({"messages": messages}) == 124


def test_tools_count_as_the_api_counted_them() -> None:
    """[doc] The cookbook's function-calling example: 101 prompt tokens on gpt-4o."""
    location = {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}
    unit = {
        "type": "string",
        "description": "The unit of temperature to return",
        "enum": ["celsius", "fahrenheit"],
    }
    function = {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {"location": location, "unit": unit},
            "required": ["location"],
        },
    }
    messages = [
        {
            "role": "system",
            "content": "You are a helpful assistant that can answer to questions about the "
            "weather.",
        },
        {"role": "user", "content": "What's the weather like in San Francisco?"},
    ]
    tools = [{"type": "function", "function": function}]
    assert chat_tokens({"messages": messages, "tools": tools}) == 101


def test_schema_keywords_the_tool_rule_leaves_out_count_their_json() -> None:
    """[inferred] A nested schema adds the tokens of its JSON; a tool that is no function
    counts its JSON (plus the list's 12, carried by the first tool)."""
    tok = tokenizer_named("o200k_base")
    hello = [{"role": "user", "content": "hi"}]
    alone = chat_tokens({"messages": hello})

    def function(spec: dict[str, Any]) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"a": spec}, "$defs": {"b": {}}}
        return {"type": "function", "function": {"name": "f", "parameters": schema}}

    flat = function({"type": "string", "description": "An a."})
    nested = function({"type": "array", "description": "An a.", "items": {"type": "string"}})
    rule = 12 + 7 + tok.count("f:") + tok.count('{"$defs":{"b":{}}}') + 3 + 3
    assert chat_tokens({"messages": hello, "tools": [flat]}) - alone == rule + tok.count(
        "a:string:An a"
    )
    assert chat_tokens({"messages": hello, "tools": [nested]}) - alone == rule + tok.count(
        "a:array:An a"
    ) + tok.count('{"items":{"type":"string"}}')
    search = [{"type": "web_search"}]
    with_search = responses_tokens({"input": hello, "tools": search})
    assert with_search - responses_tokens({"input": hello}) == 12 + tok.count(
        '{"type":"web_search"}'
    )


def test_each_message_is_framed_and_the_reply_primed() -> None:
    tok = tokenizer_named("o200k_base")
    hello = {"role": "user", "content": "hello world"}
    assert chat_tokens({"messages": [hello]}) == 3 + 1 + 2 + 3
    named = {**hello, "name": "alice_bob"}
    assert chat_tokens({"messages": [named]}) == 3 + 1 + 2 + 1 + tok.count("alice_bob") + 3
    # Responses: instructions are a developer message, a string input a user message.
    payload = {"instructions": "be brief", "input": "hello world"}
    assert responses_tokens(payload) == (3 + 1 + tok.count("be brief")) + (3 + 1 + 2) + 3


def test_a_call_is_framed_like_a_message_and_an_output_is_a_tool_message() -> None:
    tok = tokenizer_named("o200k_base")
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p":"a"}'}
    output = {"type": "function_call_output", "call_id": "c1", "output": "done"}
    assert responses_tokens({"input": [call, output]}) == (3 + 1 + 5) + (3 + 1 + 1) + 3
    assert tok.count('{"p":"a"}') == 5


# --- media rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((200, 200), 54),  # [doc] ~54
        ((1000, 1000), 1334),  # [doc] ~1334
        ((1092, 1092), 1533),  # [doc] ~1590: resized here to 1.15 MP (see the docs)
        ((3000, 500), 546),  # long edge to 1,568: 1568 x 261
        (None, 1533),  # unknown: an image at the resize limit
    ],
)
def test_anthropic_images_cost_their_area_over_750_after_the_resize(
    size: tuple[int, int] | None, tokens: int
) -> None:
    assert media.anthropic_image(size) == tokens


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # [doc] 4 tiles
        ((2048, 4096), "high", 1105),  # [doc] 1024 x 2048, then 768 x 1536: 6 tiles
        ((4096, 8192), "low", 85),  # [doc] low is fixed
        ((100, 100), "auto", 255),  # never scaled up: one tile
        (None, "auto", 765),  # unknown: four tiles
        (None, "low", 85),
    ],
)
def test_openai_images_cost_85_plus_170_a_tile(
    size: tuple[int, int] | None, detail: str, tokens: int
) -> None:
    assert media.openai_image(size, detail) == tokens


def test_pdfs_cost_text_and_an_image_a_page() -> None:
    assert media.anthropic_pdf(3) == 3 * (1500 + 1533)
    assert media.anthropic_pdf(None) == media.anthropic_pdf(1)  # a URL: one page
    assert media.anthropic_pdf(10**6) == media.anthropic_pdf(100)  # the APIs' page limit
    assert media.openai_pdf(2) == 2 * (1500 + 765)


def image_bytes(fmt: str, size: tuple[int, int], **options: Any) -> bytes:
    image = pytest.importorskip("PIL.Image")
    mode = "RGBA" if fmt in ("PNG", "WEBP") else "RGB"
    out = io.BytesIO()
    image.new(mode, size, (10, 20, 30)).save(out, fmt, **options)
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "options"),
    [
        ("PNG", {}),
        ("JPEG", {}),
        ("JPEG", {"progressive": True, "exif": b"Exif\x00\x00" + b"\x00" * 4000}),
        ("GIF", {}),
        ("WEBP", {"lossless": True}),  # VP8L
        ("WEBP", {"quality": 80}),  # RGBA lossy: VP8X
    ],
)
def test_image_sizes_come_from_the_headers(fmt: str, options: dict[str, Any]) -> None:
    for size in [(1, 1), (17, 3), (1000, 700), (9000, 2), (3, 16000)]:
        assert media.image_size(image_bytes(fmt, size, **options)) == size


def test_lossy_webp_without_alpha_reads_its_vp8_frame() -> None:
    image = pytest.importorskip("PIL.Image")
    out = io.BytesIO()
    image.new("RGB", (321, 123)).save(out, "WEBP", quality=50)
    assert out.getvalue()[12:16] == b"VP8 "
    assert media.image_size(out.getvalue()) == (321, 123)


def pdf(pages: int, *, compressed: bool = False) -> bytes:
    """A small PDF of `pages` pages; `compressed` puts the page objects in an object stream."""
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    head = (
        "1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj\n"
    ).encode()
    page_objects = "".join("<< /Type /Page /Parent 2 0 R >>\n" for _ in range(pages)).encode()
    if not compressed:
        return b"%PDF-1.4\n" + head + page_objects + b"%%EOF\n"
    body = zlib.compress(page_objects)
    stream = (
        f"9 0 obj << /Type /ObjStm /N {pages} /First 0 /Filter /FlateDecode "
        f"/Length {len(body)} >>\nstream\n"
    ).encode()
    return b"%PDF-1.7\n" + head + stream + body + b"\nendstream endobj\n%%EOF\n"


def test_pdf_pages_are_counted_plain_or_in_object_streams() -> None:
    assert media.pdf_pages(pdf(3)) == 3
    assert media.pdf_pages(pdf(4, compressed=True)) == 4
    assert media.pdf_pages(b"%PDF-1.4\nno pages at all") is None
    assert media.pdf_pages(b"not a pdf /Type /Page") is None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_anthropic_blocks_count_by_the_media_rules() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    image["source"]["data"] = b64(png(200, 200))
    assert block_tokens(image, "messages") == 54
    by_url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert block_tokens(by_url, "messages") == 1533
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(3))},
    }
    assert block_tokens(document, "messages") == 3 * (1500 + 1533)
    url_pdf = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    assert block_tokens(url_pdf, "messages") == 1500 + 1533
    plain = {"type": "document", "source": {"type": "text", "media_type": "text/plain"}}
    plain["source"]["data"] = "x " * 40
    assert block_tokens({**plain, "title": "x y"}, "messages") == 42
    content = {"type": "document", "source": {"type": "content", "content": [image]}}
    assert block_tokens(content, "messages") == 54


def test_the_wire_estimate_counts_media_like_anthropic() -> None:
    blocks = [
        TextBlock(text="x " * 10),
        ImageBlock(media_type="image/png", data=b64(png(200, 200))),
        ImageRefBlock(url="https://example.com/a.png"),
        DocumentBlock(media_type="application/pdf", data=b64(pdf(2))),
        DocumentBlock(media_type="text/plain", data="x " * 5),
        DocumentBlock(url="https://example.com/a.pdf"),
    ]
    assert estimate_tokens(blocks) == 10 + 54 + 1533 + 2 * 3033 + 5 + 3033


def user_part(part: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [part]}]


def test_openai_parts_count_by_the_media_rules() -> None:
    frame = 3 + 1 + 3  # the user message's frame, its role, the reply's priming
    square = f"data:image/png;base64,{b64(png(1024, 1024))}"
    chat_image = {"type": "image_url", "image_url": {"url": square}}
    assert chat_tokens({"messages": user_part(chat_image)}) == frame + 765
    low = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
    assert chat_tokens({"messages": user_part(low)}) == frame + 85
    remote = {"type": "input_image", "image_url": "https://example.com/a.png"}
    assert responses_tokens({"input": user_part(remote)}) == frame + 765
    two_pages = f"data:application/pdf;base64,{b64(pdf(2))}"
    chat_file = {"type": "file", "file": {"file_data": two_pages, "filename": "a.pdf"}}
    assert chat_tokens({"messages": user_part(chat_file)}) == frame + 2 * 2265
    by_id = {"type": "file", "file": {"file_id": "file-123"}}
    assert chat_tokens({"messages": user_part(by_id)}) == frame + 2265
    by_url = {"type": "input_file", "file_url": "https://example.com/a.pdf"}
    assert responses_tokens({"input": user_part(by_url)}) == frame + 2265
    text = f"data:text/plain;base64,{b64(b'hello world')}"
    text_file = {"type": "input_file", "file_data": text, "filename": "a.txt"}
    assert responses_tokens({"input": user_part(text_file)}) == frame + 2


def test_keys_inside_media_and_text_are_the_same_one_at_a_time_or_all_at_once() -> None:
    square = f"data:image/png;base64,{b64(png(600, 300))}"
    content = [
        {"type": "input_text", "text": "look at this, then that: お誕生日"},
        {"type": "input_image", "image_url": square},
        {"type": "input_file", "file_id": "file-1"},
    ]
    payload = {"model": "gpt-4.1", "input": [{"role": "user", "content": content}]}
    rendered = render(
        payload,
        "responses",
        model="gpt-4.1",
        org="o",
        hidden=5,
        ttls=("30m", "12h"),
        memo=ChainMemo(),
        tokenizer=tokenizer_named("o200k_base"),
        keep_tokens=True,
    )
    positions = list(range(1, rendered.total + 1))
    together = rendered.keys(positions)
    assert [rendered.key(p) for p in positions] == [together[p] for p in positions]
    assert len(set(together.values())) == rendered.total  # a key per position
    memo = ChainMemo()
    assert rendered.keys(positions[::7], memo) == {p: together[p] for p in positions[::7]}
    assert rendered.keys(positions[::7], memo) == {p: together[p] for p in positions[::7]}


# --- hostile bytes ------------------------------------------------------------------------


def test_truncated_and_corrupt_images_count_the_fixed_estimate() -> None:
    whole = png(300, 200)
    assert media.image_size(whole) == (300, 200)
    for broken in (whole[:20], whole[:8], b"\xff\xd8\xff\xe0\x00", b"RIFF\x00\x00\x00\x00WEBPVP8 "):
        assert media.image_size(broken) is None
    block = {"type": "image", "source": {"type": "base64", "data": b64(whole[:20])}}
    assert block_tokens(block, "messages") == media.anthropic_image(None)
    assert media.b64_bytes("!!!") == b""


def test_hostile_media_is_parsed_in_bounded_time() -> None:
    blob = os.urandom(10 * 1024 * 1024)
    pages = b"%PDF-1.4\n" + b"/Type /Page " * 10**6
    endless_jpeg = b"\xff\xd8" + b"\xff\xe1\x00\x02" * 200_000
    bomb = zlib.compress(b"\x00" * (200 * 1024 * 1024), 9)
    bomb_pdf = b"%PDF-1.7\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n" + bomb
    started = time.perf_counter()
    assert media.image_size(blob) is None or blob[:2] == b"\xff\xd8"
    assert media.pdf_pages(b"%PDF" + blob) in (None, *range(1, 101))
    assert media.pdf_pages(pages) == media.MAX_PDF_PAGES
    assert media.image_size(endless_jpeg) is None
    assert media.pdf_pages(bomb_pdf) is None
    assert len(media.b64_bytes(b64(blob))) == len(blob)
    assert time.perf_counter() - started < 20.0


@settings(max_examples=300, deadline=None)
@given(
    head=st.sampled_from(
        [b"", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"RIFF\x00\x00\x00\x00WEBP", b"\xff\xd8", b"%PDF"]
    ),
    rest=st.binary(max_size=600),
)
def test_any_bytes_parse_to_a_size_or_none(head: bytes, rest: bytes) -> None:
    data = head + rest
    size = media.image_size(data)
    assert size is None or (size[0] > 0 and size[1] > 0)
    pages = media.pdf_pages(data)
    assert pages is None or 1 <= pages <= media.MAX_PDF_PAGES
    assert media.anthropic_image(size) >= 1
    assert media.openai_image(size) >= media.OPENAI_BASE


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_decodes_as_base64_or_to_nothing(text: str) -> None:
    assert isinstance(media.b64_bytes(text), bytes)
    parsed = media.data_url("data:" + text)
    assert parsed is None or (";base64," in text and text.endswith(parsed[1]))
