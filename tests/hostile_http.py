"""Hostile requests to the gateway, drawn by hypothesis (no tests here).

A `Probe` is one request a client may send by mistake or on purpose, with what the
gateway must answer when the answer is known in advance (`expect`). The strategies
cover each way a request goes wrong, one at a time, against a session that exists:
a body whose every field (of every endpoint) is replaced by a value of the wrong type,
a huge number, a string with a lone surrogate, NUL or control characters, or deep
nesting; bodies that are not JSON, not UTF-8, over the size limit, or sent under
another Content-Type; query values; ids; and the Accept, Idempotency-Key,
Authorization and X-Stoker-Session headers.

Bodies are written as bytes by `encode`, because `json.dumps` refuses some of what a
hostile client sends (a 5,000-digit number) and `Raw` lets a fragment in as is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from stoker.config import DEFAULT_LIMITS

MAX_BODY = DEFAULT_LIMITS.max_body_bytes
MAX_CHARS = DEFAULT_LIMITS.max_message_chars
BAD_REQUEST = frozenset({400})


@dataclass(frozen=True, slots=True)
class Raw:
    """JSON text put into a body as is: what `json.dumps` will not write."""

    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One request; `expect` is the set of statuses allowed (None: any 2xx-4xx)."""

    kind: str
    method: str
    path: str
    headers: dict[str, bytes] = field(default_factory=dict)
    content: bytes | None = None
    chunked: bool = False  # sent without Content-Length
    expect: frozenset[int] | None = None
    never_streams: bool = False  # Accept refuses text/event-stream (q=0)

    def body(self) -> bytes | Iterator[bytes] | None:
        if self.content is None or not self.chunked:
            return self.content
        size = 64 * 1024
        return iter([self.content[i : i + size] for i in range(0, len(self.content), size)])

    def __repr__(self) -> str:
        body = self.content if self.content is None or len(self.content) < 300 else b"..."
        return f"Probe({self.kind}: {self.method} {self.path[:200]} {self.headers} {body!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """What hypothesis prints for a failing example: the repr, not a megabyte body."""
        printer.text(repr(self))


def encode(value: Any) -> bytes:
    """`value` as JSON bytes, `Raw` fragments included verbatim; strings are written
    ASCII-only, so a lone surrogate becomes the escape `\\ud800` a client would send."""
    if isinstance(value, Raw):
        return value.data
    if isinstance(value, dict):
        items = (encode(str(k)) + b":" + encode(v) for k, v in value.items())
        return b"{" + b",".join(items) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(encode(v) for v in value) + b"]"
    return json.dumps(value).encode("ascii")


# -- values ---------------------------------------------------------------------------------

_any_char = st.characters(codec=None)  # every code point, surrogates included
_control = st.characters(categories=["Cc"])


def _with(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Text with at least one character drawn from `inner` somewhere in it."""
    return st.builds(lambda a, c, b: a + c + b, st.text(max_size=8), inner, st.text(max_size=8))


lone_surrogate_text = _with(st.characters(categories=["Cs"]))
nul_text = _with(st.just("\x00"))
control_text = _with(_control)

huge_numbers = st.sampled_from(
    [
        b"9" * 5000,
        b"-" + b"9" * 5000,
        b"1e999999",
        b"-1e999999",
        b"0." + b"0" * 5000 + b"1",
        b"1" + b"0" * 400 + b".5",
        b"18446744073709551616",
    ]
).map(Raw)


def nested(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> Raw:
    return Raw(opener * depth + closer * depth)


deep_values = st.builds(
    nested, st.sampled_from([150, 199, 200, 201, 255, 1000, 5000, 20_000])
) | st.builds(lambda n: Raw(b'{"a":' * n + b"1" + b"}" * n), st.sampled_from([199, 201, 3000]))

bad_utf8_strings = st.sampled_from(
    [b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82", b"a\x80b", b"\xf4\x90\x80\x80"]
).map(lambda b: Raw(b'"' + b + b'"'))

escaped_surrogates = st.sampled_from(
    [b'"\\ud800"', b'"\\udfff"', b'"a\\ud83d"', b'"\\ude00b"', b'"\\ud800\\ud800"']
).map(Raw)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
long_strings = st.sampled_from([1_000, MAX_CHARS, MAX_CHARS + 1, 300_000]).map(lambda n: "x" * n)

# What h11 lets a client put in a header value: visible ASCII and obs-text bytes, with
# spaces and tabs only inside.
header_values = st.binary(max_size=60).map(
    lambda b: bytes(c for c in b if c in b" \t" or 0x21 <= c <= 0x7E or c >= 0x80).strip(b" \t")
)


# Values refused wherever they stand in a body: text UTF-8 cannot hold, bytes that are
# not UTF-8, and nesting well past the gateway's limit (200 levels).
rejected_values: st.SearchStrategy[Any] = st.one_of(
    escaped_surrogates,
    lone_surrogate_text,
    bad_utf8_strings,
    st.builds(nested, st.sampled_from([256, 1000, 5000, 20_000])),
)
odd_values: st.SearchStrategy[Any] = st.one_of(
    json_values,
    huge_numbers,
    deep_values,
    nul_text,
    control_text,
    st.text(_any_char, max_size=30),
    long_strings,
)


# -- bodies per endpoint ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Template:
    """An endpoint with a body that works; `text_at` is where the message text sits."""

    path: str
    body: dict[str, Any]
    headers: dict[str, bytes] = field(default_factory=dict)
    text_at: tuple[Any, ...] | None = None


def templates(sid: str) -> list[Template]:
    """Every JSON endpoint, each body shape once, streamed and not."""
    session = {"X-Stoker-Session": sid.encode()}
    parts = [{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "x"}}]
    chat = {
        "model": "stoker",
        "messages": [{"role": "system", "content": "ignored"}, {"role": "user", "content": "hi"}],
        "stream": False,
        "stream_options": {"include_usage": True},
    }
    responses = {
        "model": "stoker",
        "instructions": "ignored",
        "input": [{"role": "user", "content": "hi"}],
        "stream": False,
    }
    typed = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    messages = f"/v1/sessions/{sid}/messages"
    return [
        Template(
            path="/v1/responses", body=responses, headers=session, text_at=("input", 0, "content")
        ),
        Template(
            path="/v1/responses",
            body={"input": [typed]},
            text_at=("input", 0, "content", 0, "text"),
        ),
        Template(
            path="/v1/responses",
            body={"input": "hi", "stream": True},
            headers=session,
            text_at=("input",),
        ),
        Template(path="/v1/sessions", body={"model": "claude-sonnet-4-6", "reasoning": "low"}),
        Template(path=messages, body={"text": "hello"}, text_at=("text",)),
        Template(path=messages + "?stream=true", body={"text": "hello"}, text_at=("text",)),
        Template(path=f"/v1/sessions/{sid}/commands/help", body={"argument": ""}),
        Template(path=f"/v1/sessions/{sid}/approvals/{'a' * 22}", body={"decision": "deny"}),
        Template(path=f"/v1/sessions/{sid}/commands/model", body={"argument": "claude-sonnet-4-6"}),
        Template(path=f"/v1/sessions/{sid}/commands/reasoning", body={"argument": "low"}),
        Template(
            path="/v1/chat/completions",
            body=chat,
            headers=session,
            text_at=("messages", 1, "content"),
        ),
        Template(
            path="/v1/chat/completions",
            body={**chat, "messages": [{"role": "user", "content": parts}]},
            text_at=("messages", 0, "content", 0, "text"),
        ),
        Template(
            path="/v1/chat/completions",
            body={"messages": [{"role": "user", "content": "hi"}], "stream": True},
            headers=session,
            text_at=("messages", 0, "content"),
        ),
    ]


_STRINGS = {"text", "role", "type", "argument", "decision"}  # anything but a string: 400
_OPTIONAL_STRINGS = {"model", "reasoning", "instructions", "reason"}  # a string or null


def expected(template: Template, at: tuple[Any, ...], value: Any) -> frozenset[int] | None:
    """What the gateway must answer when the value at `at` is replaced by `value` (an
    accepted value, not one of `rejected_values`); None where it depends."""
    if not at:
        return None if isinstance(value, dict) else BAD_REQUEST
    key = at[-1]
    if (key in _STRINGS and not isinstance(value, str)) or (
        key in _OPTIONAL_STRINGS and not isinstance(value, str | None)
    ):
        return BAD_REQUEST
    if at == template.text_at and isinstance(value, str):
        if len(value) > MAX_CHARS:
            return frozenset({413})
        if "\x00" in value or not value.strip():
            return BAD_REQUEST
    return None


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in `value` a field or an item sits, the body itself first."""
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*at, i))


def replaced(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    """`value` with what sits at `at` replaced by `new`."""
    if not at:
        return new
    head, rest = at[0], at[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    return [replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


def removed(value: Any, at: tuple[Any, ...]) -> Any:
    """`value` without what sits at `at` (a non-empty path)."""
    head, rest = at[0], at[1:]
    if rest:
        return replaced(value, (head,), removed(value[head], rest))
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != head}
    return [v for i, v in enumerate(value) if i != head]


def _json(extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    return {"Content-Type": b"application/json", **(extra or {})}


@st.composite
def field_probes(draw: st.DrawFn, sid: str) -> Probe:
    """A working body with one field, item or the whole body made hostile, or removed, or
    with an unknown field added."""
    template = draw(st.sampled_from(templates(sid)))
    at = draw(st.sampled_from(list(paths(template.body))))
    rejected = draw(st.booleans())
    value = draw(rejected_values if rejected else odd_values)
    how = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
    expect = BAD_REQUEST if rejected else None
    if how == "remove" and at:
        new, expect = removed(template.body, at), None
    elif how == "add":
        new = {**template.body, draw(st.text(_any_char, min_size=1, max_size=10)): value}
    else:
        new = replaced(template.body, at, value)
        expect = expect or expected(template, at, value)
    return Probe(
        kind="field",
        method="POST",
        path=template.path,
        headers=_json(template.headers),
        content=encode(new),
        expect=expect,
    )


@st.composite
def body_probes(draw: st.DrawFn, sid: str) -> Probe:
    """Bodies that are not one JSON value in UTF-8: cut short, with bytes after them, a
    byte order mark, UTF-16, a bare open bracket thousands deep, or random bytes."""
    template = draw(st.sampled_from(templates(sid)))
    good = encode(template.body)
    how = draw(st.sampled_from(["cut", "trailing", "bom", "utf16", "open", "bytes"]))
    if how == "cut":
        content = good[: draw(st.integers(1, len(good) - 1))]
    elif how == "trailing":
        content = good + draw(st.sampled_from([b"x", b"{}", b",", b"\x00", b"]"]))
    elif how == "bom":
        content = b"\xef\xbb\xbf" + good
    elif how == "utf16":
        content = good.decode().encode("utf-16")
    elif how == "open":
        opener = draw(st.sampled_from([b"[", b"{", b'{"a":']))
        content = opener * draw(st.sampled_from([5000, 50_000]))
    else:
        content = draw(st.binary(min_size=1, max_size=64))
    return Probe(
        kind="body",
        method="POST",
        path=template.path,
        headers=_json(template.headers),
        content=content,
        expect=None if how == "bytes" else BAD_REQUEST,
    )


_NOT_JSON = [
    "text/plain",
    "text/plain; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "application/octet-stream",
    "text/json",
    "application/jsonx",
    "application/json; charset=latin-1",
    "application/json; charset=utf-16",
    "json",
    "*/*",
]
_JSON = [
    "application/json",
    "Application/JSON",
    "application/json;charset=UTF-8",
    'application/json; charset="utf-8"',
    "application/merge-patch+json",
]


@st.composite
def content_type_probes(draw: st.DrawFn, sid: str) -> Probe:
    """A working body under another Content-Type: 415 unless the type is JSON."""
    template = draw(st.sampled_from(templates(sid)))
    named = draw(st.sampled_from(_NOT_JSON + _JSON) | header_values)
    if isinstance(named, str):
        ctype, expect = named.encode(), frozenset({415}) if named in _NOT_JSON else None
    else:
        ctype, expect = named, None
    return Probe(
        kind="content-type",
        method="POST",
        path=template.path,
        headers={**template.headers, "Content-Type": ctype},
        content=encode(template.body),
        expect=expect,
    )


# -- queries, ids, methods, sizes ------------------------------------------------------------

_query_text = st.text(_any_char, max_size=12) | st.sampled_from(
    ["²", "٣", "1.5", "-1", "0", "501", "1e3", " 5", "5 ", "0x10", "+5", "", "9" * 5000, "true"]
)


def _q(value: str) -> str:
    """Percent-encoded whole, dots too, so the client sends it as is (a bare "." or ".."
    would be resolved away before it left)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="").replace(".", "%2E")


def _limit_ok(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) <= 3 and 1 <= int(value) <= 500


@st.composite
def query_probes(draw: st.DrawFn, sid: str) -> Probe:
    """`?limit=` on the session list and `?stream=` on a message, with any value."""
    value = draw(_query_text)
    if draw(st.booleans()):
        return Probe(
            kind="query",
            method="GET",
            path=f"/v1/sessions?limit={_q(value)}",
            expect=frozenset({200}) if _limit_ok(value) else BAD_REQUEST,
        )
    good = value.lower() in {"true", "false", "1", "0", "yes", "no"}
    return Probe(
        kind="query",
        method="POST",
        path=f"/v1/sessions/{sid}/messages?stream={_q(value)}",
        headers=_json(),
        content=b'{"text": "hello"}',
        expect=frozenset({200}) if good else BAD_REQUEST,
    )


_ids = st.text(_any_char, min_size=1, max_size=80) | st.sampled_from(
    ["x" * 32, "A" * 64, "a" * 65, "x" * 15, "x" * 32 + "\n", "%00", "..%2F..", " ", "*", "null"]
)


@st.composite
def id_probes(draw: st.DrawFn, sid: str) -> Probe:
    """Every session route with an id that names no session of this user."""
    raw = draw(_ids)
    bad = _q(raw)
    method, path, content = draw(
        st.sampled_from(
            [
                ("GET", f"/v1/sessions/{bad}", None),
                ("DELETE", f"/v1/sessions/{bad}", None),
                ("GET", f"/v1/sessions/{bad}/usage", None),
                ("POST", f"/v1/sessions/{bad}/messages", b'{"text": "hello"}'),
                ("POST", f"/v1/sessions/{bad}/commands/help", b"{}"),
                ("POST", f"/v1/sessions/{sid}/commands/{bad}", b"{}"),
            ]
        )
    )
    # The server decodes %2F before routing, so an id holding "/" may reach another route
    # (…/messages read with GET is a 405) or a trailing-slash redirect (307); a bad command
    # name is a 400 that lists the commands.
    expect = frozenset({400}) if path.endswith("/commands/" + bad) else frozenset({404, 405})
    if "/" in raw:
        expect |= {307, 404, 405}
    return Probe(
        kind="id", method=method, path=path, headers=_json(), content=content, expect=expect
    )


@st.composite
def method_probes(draw: st.DrawFn, sid: str) -> Probe:
    """A method a route does not take: 405 with the JSON error."""
    method = draw(st.sampled_from(["PUT", "PATCH", "OPTIONS"]))
    path = draw(
        st.sampled_from(
            [
                "/v1/sessions",
                f"/v1/sessions/{sid}",
                f"/v1/sessions/{sid}/messages",
                "/v1/chat/completions",
                "/v1/responses",
            ]
        )
    )
    return Probe(kind="method", method=method, path=path, expect=frozenset({405}))


@st.composite
def size_probes(draw: st.DrawFn, sid: str) -> Probe:
    """A body over the byte limit (declared, or chunked without a length), or a message
    over the character limit in a body under it: 413."""
    template = draw(st.sampled_from(templates(sid)))
    path, headers = template.path, template.headers
    how = draw(st.sampled_from(["declared", "chunked", "chars"]))
    if how == "chars":
        path, headers = f"/v1/sessions/{sid}/messages", {}
        content = encode({"text": "y" * (MAX_CHARS + draw(st.integers(1, 1000)))})
    else:
        content = encode({**template.body, "pad": "x" * (MAX_BODY + draw(st.integers(0, 1000)))})
    return Probe(
        kind="size",
        method="POST",
        path=path,
        headers=_json(headers),
        content=content,
        chunked=how == "chunked",
        expect=frozenset({413}),
    )


# -- headers ---------------------------------------------------------------------------------

_zero = st.sampled_from(["0", "0.0", "0.00", "0.000"])
_others = st.lists(
    st.sampled_from(["application/json", "*/*", "text/*", "application/json;q=0.5", "*/*;q=0.1"]),
    max_size=2,
)


@st.composite
def header_probes(draw: st.DrawFn, sid: str) -> Probe:
    """A working message with one of Accept, Idempotency-Key, Authorization or
    X-Stoker-Session set to any value a client could send."""
    name = draw(
        st.sampled_from(
            ["Accept", "Accept", "Idempotency-Key", "Authorization", "X-Stoker-Session"]
        )
    )
    value = draw(header_values)
    expect: frozenset[int] | None = None
    never_streams = False
    if name == "Accept" and draw(st.booleans()):
        ranges = [f"text/event-stream;q={draw(_zero)}", *draw(_others)]
        value = ", ".join(draw(st.permutations(ranges))).encode()
        never_streams = True
    if name == "Authorization":
        expect = frozenset({401})
    path, content = f"/v1/sessions/{sid}/messages", b'{"text": "hello"}'
    if name == "X-Stoker-Session":
        path, content = "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}]}'
        expect = frozenset({404}) if value else frozenset({200})
    return Probe(
        kind="header",
        method="POST",
        path=path,
        headers=_json({name: value}),
        content=content,
        expect=expect,
        never_streams=never_streams,
    )


KINDS = {
    "field": field_probes,
    "body": body_probes,
    "content-type": content_type_probes,
    "query": query_probes,
    "id": id_probes,
    "method": method_probes,
    "size": size_probes,
    "header": header_probes,
}


def probes(sid: str) -> st.SearchStrategy[Probe]:
    """Any hostile request against session `sid`, fields of bodies most often."""
    return st.one_of(field_probes(sid), field_probes(sid), *(make(sid) for make in KINDS.values()))
