"""The frozen request prefix: what keys the provider's cache, as data.

A session builds its `Prefix` once and every turn, fork, sub-agent and resume sends it
verbatim. The tools are kept as the exact bytes sent (canonical JSON, sorted by name);
the system prompt as its exact text; the cache-keying parameters as a small value.
Nothing re-derives any of it. `to_json()`/`from_json()` round-trip byte-identically so a
stored session resumes with the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from typing import Any

from stoker.errors import WireError
from stoker.wire.canonical import canonical_json


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheParams:
    """Request parameters that are part of the provider's cache key.

    `tool_choice` is "auto", "any", "none" or "tool:NAME". `thinking_budget` None means
    thinking off. `cache_slot` is the lineage's share of OpenAI's `prompt_cache_key`
    (`stoker.cache.keys`), chosen once; None for Anthropic and for sessions stored before
    it existed. `output` is the native structured output every request asks for, as
    canonical JSON `{"name": ..., "schema": ...}` (`stoker.wire.output`); None for text.
    Changing any of these mid-conversation moves the prefix.
    """

    model: str
    thinking_budget: int | None = None
    effort: str | None = None
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    cache_slot: str | None = None
    output: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, but a slot and an output only when set, so prefixes without them
        keep the bytes (and fingerprints) they were stored with."""
        data = {name: getattr(self, name) for name in _PARAMS}
        for optional in ("cache_slot", "output"):
            if data[optional] is None:
                del data[optional]
        return data


_PARAMS = tuple(f.name for f in fields(CacheParams))  # in order; `fields()` is slow to ask


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prefix:
    """Cache-keying params + tools wire bytes + system text. Frozen, hashable, comparable."""

    params: CacheParams
    tools: tuple[bytes, ...] = ()
    system: str = ""
    tool_names: tuple[str, ...] = field(init=False, compare=False, repr=False)
    tool_fingerprints: tuple[str, ...] = field(init=False, compare=False, repr=False)
    params_fingerprint: str = field(init=False, compare=False, repr=False)
    system_fingerprint: str = field(init=False, compare=False, repr=False)
    fingerprint: str = field(init=False, compare=False, repr=False)
    wire_memo: dict[str, Any] = field(
        init=False, compare=False, repr=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        names = []
        for raw in self.tools:
            try:
                names.append(json.loads(raw)["name"])
            except (ValueError, KeyError, TypeError) as exc:
                raise WireError(
                    f"a tool in the prefix is not a JSON object with a name: {raw[:80]!r}"
                ) from exc
        if len(set(names)) != len(names):
            raise WireError(f"duplicate tool names in the prefix: {sorted(names)}")
        object.__setattr__(self, "tool_names", tuple(names))
        object.__setattr__(self, "tool_fingerprints", tuple(_sha(t) for t in self.tools))
        object.__setattr__(self, "params_fingerprint", _sha(canonical_json(self.params.to_dict())))
        object.__setattr__(self, "system_fingerprint", _sha(self.system.encode("utf-8")))
        object.__setattr__(self, "fingerprint", _sha(self.to_json()))

    def with_params(self, **changes: Any) -> Prefix:
        """A new prefix with changed params: only for a declared rebase."""
        return replace(self, params=replace(self.params, **changes))

    def to_json(self) -> bytes:
        """Canonical bytes; tools are embedded as their exact strings."""
        return canonical_json(
            {
                "params": self.params.to_dict(),
                "system": self.system,
                "tools": [t.decode("utf-8") for t in self.tools],
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> Prefix:
        try:
            obj = json.loads(data)
            return cls(
                params=CacheParams(**obj["params"]),
                tools=tuple(t.encode("utf-8") for t in obj["tools"]),
                system=obj["system"],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise WireError(f"stored prefix does not parse: {exc}") from exc
