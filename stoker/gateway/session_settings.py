"""What a gateway session's agent is made of: the operator's defaults plus the session's
own choices (`/model`, `/reasoning`), as one frozen value.

Keeping every setting in one value is what makes the agent cache safe: the signature is
computed over all of its fields, so a config edit cannot leave a stale agent behind
(docs/cache-breakers.md, "Gateway rebuilds"). Secrets are not here: the provider key
stays with the gateway and only its digest is signed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from stoker.agent.system_prompt import DEFAULT_SYSTEM
from stoker.cache.models import ModelInfo
from stoker.config import DEFAULT_MODEL, DEFAULT_PROVIDER
from stoker.errors import ConfigError

# What a user may choose per session; everything else is the operator's.
OVERRIDABLE = frozenset({"model", "effort", "thinking_budget"})
# What the surface a session is served on sets when it creates it (a chat platform and
# its formatting rules; the user's memory as it was then): stored with the session like a
# user's choices, so every rebuild of it has the same system prompt sections, never
# today's. /new and /clear keep the surface; the memory is read again for each new session.
SURFACE = frozenset({"platform", "formatting", "memory"})
PER_SESSION = OVERRIDABLE | SURFACE
REASONING_FIELDS = ("effort", "thinking_budget")
_LEVEL = re.compile(r"^[a-z]{1,16}$")
_OFF = frozenset({"off", "none", "default"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """Everything that shapes a session's agent or routes its calls (never a secret)."""

    provider: str = DEFAULT_PROVIDER.removesuffix(":")  # a kind: the model is its own field
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_mode: str | None = None  # e.g. "openai_chat" / "openai_responses"
    toolsets: tuple[str, ...] | None = None  # None: every toolset of the registry
    disabled_toolsets: tuple[str, ...] = ()
    system: str = DEFAULT_SYSTEM
    ephemeral_prompt: str = ""  # sent as a note in each user message, never in the prefix
    effort: str | None = None
    thinking_budget: int | None = None
    max_tokens: int = 4096
    # Where a turn goes on when the provider is unavailable ("PROVIDER:MODEL", in order),
    # and how long the primary then rests before it is tried again.
    fallbacks: tuple[str, ...] = ()
    fallback_cooldown: float = 0.0
    platform: str = ""  # the chat platform a session serves ("" for HTTP clients)
    formatting: str = ""  # that platform's formatting rules: a system prompt section
    memory: str = ""  # the user's memory when the session was created: a section too

    @property
    def reasoning(self) -> tuple[str | None, int | None]:
        return (self.effort, self.thinking_budget)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; stored with the session so a rebuild knows what its prefix reflects."""
        data = asdict(self)
        data["toolsets"] = list(self.toolsets) if self.toolsets is not None else None
        data["disabled_toolsets"] = list(self.disabled_toolsets)
        data["fallbacks"] = list(self.fallbacks)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionSettings:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("toolsets") is not None:
            values["toolsets"] = tuple(values["toolsets"])
        if "disabled_toolsets" in values:
            values["disabled_toolsets"] = tuple(values["disabled_toolsets"])
        if "fallbacks" in values:
            values["fallbacks"] = tuple(values["fallbacks"])
        return cls(**values)

    def with_overrides(self, overrides: Mapping[str, Any]) -> SessionSettings:
        return replace(self, **{k: v for k, v in overrides.items() if k in PER_SESSION})

    def signed_fields(self) -> dict[str, Any]:
        """Every field but reasoning, which may change in place (see `keeps_namespace`)."""
        data = self.to_dict()
        for name in REASONING_FIELDS:
            data.pop(name)
        return data


def parse_reasoning(level: str) -> dict[str, Any]:
    """`/reasoning LEVEL` as overrides: an effort word, or off/none/default to clear it."""
    word = level.strip().lower()
    if word in _OFF:
        return {"effort": None}
    if not _LEVEL.match(word):
        raise ConfigError(
            f"reasoning level {level!r} is not a word; use e.g. low, medium, high, or off"
        )
    return {"effort": word}


def keeps_namespace(info: ModelInfo) -> bool:
    """Whether a thinking/effort change leaves the cached tools and system readable.

    Anthropic salts only the messages with thinking and effort, unless the model renders
    them ahead of the tools (then every slot moves); OpenAI's effort rewrites hidden
    system instructions, a new prefix (docs/provider-caching.md, "Anthropic render order"
    and "OpenAI regimes").
    """
    return info.provider == "anthropic" and not info.renders_thinking_before_tools
