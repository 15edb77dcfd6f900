"""Canonical JSON for what Stoker authors (tool schemas, parameters).

Providers hash rendered JSON with object key order preserved, so anything we write
must serialize the same way in every process: keys sorted, no insignificant
whitespace, UTF-8 kept as is. What a model emitted is never passed through here;
it is replayed as the bytes the provider returned.
"""

from __future__ import annotations

import json
from typing import Any

# One encoder, built once: `json.dumps` with options builds a new one every call.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Serialize `value` to canonical JSON bytes (sorted keys, compact, UTF-8)."""
    return _CANONICAL.encode(value).encode("utf-8")


def canonicalize(value: Any) -> Any:
    """Return a copy of a JSON value whose dicts are key-sorted at every depth.

    Useful where a dict must be handed to an SDK (which serializes it itself) but the
    key order must be the canonical one.
    """
    if isinstance(value, dict):
        return {k: canonicalize(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonicalize(v) for v in value]
    return value
