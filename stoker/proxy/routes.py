"""Where a proxied call goes and who sent it: upstream URLs, API paths, tenants.

A client's key reaches the upstream unchanged and nowhere else: `tenant_of` keeps a
digest, enough to tell two clients apart (and to keep their lineages apart) and nothing
more. Hop-by-hop headers are the connection's own and are not forwarded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from urllib.parse import urlsplit

from stoker.errors import ConfigError
from stoker.wire.dialects import Dialect

UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    # Chat Completions APIs: their calls are recorded as Chat (docs/provider-caching.md).
    # Bedrock is no name here (its host names a region) and its requests are signed:
    # a proxy may forward them, never rewrite them.
    "openrouter": "https://openrouter.ai",
    "deepseek": "https://api.deepseek.com",
}

# The API paths whose calls are recorded, and the dialect of each. Any other path (model
# lists, token counting) is forwarded as it is and not recorded: it has no cache effect.
DIALECT_OF_PATH: dict[str, Dialect] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
    "/api/v1/chat/completions": "openai_chat",  # OpenRouter's path
    "/chat/completions": "openai_chat",  # DeepSeek's (and other servers') unversioned path
}

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def upstream_url(spec: str) -> str:
    """`anthropic`, `openai`, `openrouter`, `deepseek`, or an http(s) URL: a server's
    origin, or a base path the client's path follows (`http://127.0.0.1:8000/api`). A URL
    that could never be reached (no host, a port out of range, spaces, a query) is a
    `ConfigError` here, not a 502 at every call."""
    if spec in UPSTREAMS:
        return UPSTREAMS[spec]
    expected = f"expected {', '.join(UPSTREAMS)} or an http(s) URL such as http://127.0.0.1:8000"
    try:
        parts = urlsplit(spec)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ConfigError(f"--upstream {spec!r}: {exc}; {expected}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--upstream {spec!r}: {expected}")
    if parts.query or parts.fragment or any(c.isspace() for c in spec):
        raise ConfigError(
            f"--upstream {spec!r}: a URL with no spaces, query or fragment (the client's "
            f"path and query are added to it); {expected}"
        )
    return spec.rstrip("/")


def dialect_of(path: str) -> Dialect | None:
    """The dialect of a recorded API path; None for anything else."""
    return DIALECT_OF_PATH.get(path.rstrip("/"))


# Longest first: "/api/v1/chat/completions" before "/v1/chat/completions".
_SUFFIXES = sorted(DIALECT_OF_PATH.items(), key=lambda item: -len(item[0]))


def dialect_at(method: str, path: str) -> Dialect | None:
    """The dialect of a call an SDK sends from the user's process (`stoker.http_client()`):
    its path ends with one of the recorded API paths, whatever base path the client was
    given (`/v1`, `/openai/v1`, a gateway's). The proxy, serving at its own root, reads
    the path as it is (`dialect_of`)."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    for suffix, dialect in _SUFFIXES:
        if path.endswith(suffix):
            return dialect
    return None


def client_key(headers: Iterable[tuple[str, str]]) -> str:
    """The client's API key (`x-api-key` or a bearer token); empty when it sent none."""
    found = dict((k.lower(), v) for k, v in headers)
    if found.get("x-api-key"):
        return found["x-api-key"]
    scheme, _, token = found.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def tenant_of(key: str) -> str:
    """A client's tenant: a digest of its key, never the key."""
    return "t_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def forwarded_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers as they go upstream: the connection's own left out, and
    responses asked for uncompressed, so what is recorded is the bytes forwarded."""
    out = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP | {"accept-encoding"}]
    out.append(("accept-encoding", "identity"))
    return out


def returned_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The upstream's response headers as they go back to the client."""
    return {k: v for k, v in headers if k.lower() not in _HOP_BY_HOP - {"content-length"}}
