"""Gemini's explicit caches (`cachedContents`) on the wire: what creating, extending and
reading one sends and gets back.

A cache object holds a prefix the way a request would send it (`tools`,
`systemInstruction`, `toolConfig`, `contents`, rendered by `gemini.render_head` and
`gemini.render_contents`, so its bytes are the request's) and lives until `expireTime`:
`ttl` at creation, a new `ttl` or `expireTime` by a PATCH. Durations are protobuf's JSON
("3600s"), times RFC 3339 in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stoker.errors import WireError
from stoker.wire.dialects._shape import malformed
from stoker.wire.dialects.gemini import render_contents, render_head
from stoker.wire.request import Request

_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)s\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheInfo:
    """A cache object as the API describes it: its name (`cachedContents/...`), model,
    size in tokens, and when it was made and expires (seconds since the epoch)."""

    name: str
    model: str
    tokens: int
    created_at: float
    expires_at: float
    display_name: str = ""


def duration(seconds: float) -> str:
    """A protobuf Duration in JSON: "3600s", "0.5s"."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds:.9f}".rstrip("0") + "s"


def parse_duration(text: Any) -> float:
    match = _DURATION.match(str(text))
    if match is None:
        raise WireError(f"a duration is written like '3600s', not {text!r:.40}")
    return float(match.group(1))


def timestamp(at: float) -> str:
    """RFC 3339 in UTC with microseconds, as Google's APIs write times."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: Any) -> float:
    value = str(text).strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    # Google writes up to nanoseconds; Python reads microseconds.
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError as exc:
        raise WireError(f"not an RFC 3339 time: {text!r:.40}") from exc


def render_create(request: Request, *, ttl: float, display_name: str) -> dict[str, Any]:
    """The body of `POST cachedContents`: the request's prefix and messages, kept `ttl`
    seconds. `model` is the bare name, as the SDK takes it (it adds `models/`). A cache of
    the tools and system alone sends no `contents` (the API's field is optional, and
    google-genai refuses an empty list: "contents are required.")."""
    body: dict[str, Any] = {
        "model": request.prefix.params.model,
        "displayName": display_name,
        **render_head(request.prefix),
        "ttl": duration(ttl),
    }
    contents = render_contents(request)
    if contents:
        body["contents"] = contents
    return body


def render_update(ttl: float) -> dict[str, Any]:
    """The body of `PATCH cachedContents/{id}?updateMask=ttl`: `ttl` more seconds from now."""
    return {"ttl": duration(ttl)}


def bare_model(name: str) -> str:
    return name.removeprefix("models/")


def parse_cache(body: Any) -> CacheInfo:
    """A CachedContent as the API returns it."""
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise WireError(f"malformed CachedContent: {str(body)[:120]}")
    with malformed("CachedContent"):
        usage = body.get("usageMetadata") or {}
        return CacheInfo(
            name=body["name"],
            model=bare_model(str(body.get("model") or "")),
            tokens=int(usage.get("totalTokenCount") or 0),
            created_at=parse_timestamp(body["createTime"]),
            expires_at=parse_timestamp(body["expireTime"]),
            display_name=str(body.get("displayName") or ""),
        )


def render_cache(info: CacheInfo, *, updated_at: float | None = None) -> dict[str, Any]:
    """A CachedContent body (what the simulator answers); the contents are never sent
    back, as the API sends none."""
    return {
        "name": info.name,
        "displayName": info.display_name,
        "model": f"models/{info.model}",
        "createTime": timestamp(info.created_at),
        "updateTime": timestamp(info.created_at if updated_at is None else updated_at),
        "expireTime": timestamp(info.expires_at),
        "usageMetadata": {"totalTokenCount": info.tokens},
    }
