"""A native structured output as the prefix holds it: one canonical JSON text, the same
bytes for every request of a session, rendered by each dialect into its API's field
(Anthropic `output_config.format`, Chat `response_format`, Responses `text.format`).

Every provider keys its cache on it (OpenAI among its hidden settings, Anthropic in the
system prompt it adds), so it is part of `CacheParams`, changed only by a declared break.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stoker.errors import WireError
from stoker.wire.canonical import canonical_json


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeOutput:
    """JSON valid against `schema`, named `name` (OpenAI requires a name; Anthropic none)."""

    name: str
    schema: dict[str, Any]

    def to_param(self) -> str:
        """The canonical text `CacheParams.output` holds."""
        return canonical_json({"name": self.name, "schema": self.schema}).decode("utf-8")

    @classmethod
    def from_param(cls, text: str) -> NativeOutput:
        try:
            data = json.loads(text)
            return cls(name=str(data["name"]), schema=dict(data["schema"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise WireError(f"an output format that does not parse: {text[:80]!r}") from exc
