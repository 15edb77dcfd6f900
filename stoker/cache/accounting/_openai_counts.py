"""What OpenAI counts for each piece of a request, as tokens (docs/provider-caching.md,
"Token counts").

* Text: the model's encoding, exactly (`stoker.cache.tokens`).
* Messages [doc, OpenAI cookbook for the gpt-4o family]: 3 tokens frame each message
  (`<|start|>`, `<|message|>`, `<|end|>`) around its role's tokens, a name adds its
  tokens plus 1, and every reply is primed with 3 more (`<|start|>assistant<|message|>`).
  [inferred] A function call is framed like a message: 3 plus its name and arguments; a
  tool output is a message of role `tool`; an assistant message with no content but
  calls is only its calls.
* Function tools [doc, the same cookbook's gpt-4o values]: 7 per function, plus the
  tokens of `name:description` (one trailing period dropped); with properties, 3, then
  per property 3 plus the tokens of `key:type:description`; an enum adds 3 per item plus
  the item's tokens, less 3; 12 once for the tool list. [inferred] Schema keywords the
  rule leaves out (nested objects, items, ...) add the tokens of their JSON; a tool of
  another type (web search, ...) counts the tokens of its JSON.
* Images and files: `stoker.cache.media_tokens`; other parts `len(JSON) // 1000`.

A token is its bytes, or an int: that many tokens that are no text (framing, an image),
whose identity the segment's header carries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stoker.cache import media_tokens as media
from stoker.cache.tokens import Tokenizer
from stoker.wire.dialects._chain import compact

Token = bytes | int

MESSAGE_FRAME = 3
REPLY_PRIMING = 3
NAME_EXTRA = 1
FUNCTION_INIT = 7
PROPERTIES_INIT = 3
PROPERTY_KEY = 3
ENUM_INIT = -3
ENUM_ITEM = 3
FUNCTIONS_END = 12
_SCHEMA_COUNTED = ("type", "description", "enum")
# What the rule itself covers, or what renders to nothing [inferred].
_PARAMS_UNCOUNTED = ("type", "properties", "required", "additionalProperties", "$schema")


def count(tokens: Iterable[Token]) -> int:
    return sum(1 if isinstance(t, bytes) else t for t in tokens)


def head(tok: Tokenizer, role: str, name: Any = None) -> list[Token]:
    """The tokens before a message's content: `<|start|>`, role, name, `<|message|>`."""
    out: list[Token] = [1, *tok.pieces(role)]
    if name:
        out += [NAME_EXTRA, *tok.pieces(str(name))]
    out.append(1)
    return out


END: list[Token] = [MESSAGE_FRAME - 2]  # `<|end|>`: the frame's third token


def tool(tok: Tokenizer, definition: dict[str, Any], first: bool) -> list[Token]:
    """A tool definition's tokens; the first tool also carries the list's closing 12."""
    out: list[Token] = [FUNCTIONS_END] if first else []
    fn = definition.get("function")
    fn = fn if isinstance(fn, dict) else definition
    if definition.get("type", "function") != "function" or not isinstance(fn.get("name"), str):
        return out + tok.pieces(compact(definition))
    out += [FUNCTION_INIT, *tok.pieces(f"{fn['name']}:{_sentence(fn.get('description'))}")]
    params = fn.get("parameters")
    properties = params.get("properties") if isinstance(params, dict) else None
    if isinstance(params, dict):
        rest = {k: v for k, v in params.items() if k not in _PARAMS_UNCOUNTED}
        out += tok.pieces(compact(rest)) if rest else []
    if not isinstance(properties, dict) or not properties:
        return out
    out.append(PROPERTIES_INIT)
    for key, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        out.append(PROPERTY_KEY)
        enum = spec.get("enum")
        if isinstance(enum, list) and enum:
            out.append(ENUM_INIT + ENUM_ITEM * len(enum))
            for item in enum:
                out += tok.pieces(item if isinstance(item, str) else compact(item))
        kind = spec.get("type", "")
        kind = kind if isinstance(kind, str) else compact(kind)
        out += tok.pieces(f"{key}:{kind}:{_sentence(spec.get('description'))}")
        rest = {k: v for k, v in spec.items() if k not in _SCHEMA_COUNTED}
        out += tok.pieces(compact(rest)) if rest else []
    return [t for t in out if t != 0]


def _sentence(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    return text[:-1] if text.endswith(".") else text


def image(part: dict[str, Any]) -> int:
    """An `image_url` (Chat) or `input_image` (Responses) part: by the tile rule, with the
    size read from a data URL; a URL or a file id is never fetched."""
    given = part.get("image_url")
    url = given.get("url") if isinstance(given, dict) else given
    detail = (given.get("detail") if isinstance(given, dict) else None) or part.get("detail")
    size = None
    if isinstance(url, str) and (inline := media.data_url(url)) is not None:
        size = media.base64_image_size(inline[1])
    return media.openai_image(size, str(detail or "auto"))


_TEXT_EXTENSIONS = (".txt", ".md", ".csv", ".json", ".html", ".xml", ".py", ".js", ".ts")


def file(tok: Tokenizer, part: dict[str, Any]) -> int:
    """A `file` (Chat) or `input_file` (Responses) part: a PDF by its pages (the page
    count read from inline data), a text file by its text; by URL or id, one PDF page."""
    given = part.get("file")
    spec = given if isinstance(given, dict) else part
    data, name = spec.get("file_data"), str(spec.get("filename") or "")
    if not isinstance(data, str) or not data:
        return media.openai_pdf(None)
    inline = media.data_url(data)
    kind, encoded = inline if inline is not None else ("", data)
    raw = media.b64_bytes(encoded)
    if b"%PDF" not in raw[:1024] and (
        kind.startswith("text/") or name.lower().endswith(_TEXT_EXTENSIONS)
    ):
        return tok.count(raw.decode("utf-8", "replace"))
    return media.openai_pdf(media.pdf_pages(raw))
