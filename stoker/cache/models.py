"""What Stoker knows about each model: cache minimums, regimes and prices, read from data.

The table lives in `data/models.toml` so a price change or a new model is a data edit.
A dated snapshot name (`claude-sonnet-4-6-20260101`) resolves to its family entry.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from stoker.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """Cache-relevant facts about one model."""

    name: str
    provider: Literal["anthropic", "openai"]
    min_cacheable: int
    read: float
    write_5m: float
    write_1h: float
    input: float | None = None
    output: float | None = None
    regime: Literal["L", "N"] | None = None
    interval: int = 128
    renders_thinking_before_tools: bool = False
    strips_thinking: bool = False
    retention_24h: bool = False
    context_window: int | None = None  # tokens a request may hold (None: unknown)


@cache
def _table() -> dict[str, ModelInfo]:
    raw = tomllib.loads(resources.files("stoker.cache").joinpath("data/models.toml").read_text())
    out: dict[str, ModelInfo] = {}
    for name, entry in raw["models"].items():
        defaults: dict[str, Any] = raw[f"{entry['provider']}_defaults"]
        out[name] = ModelInfo(name=name, **{**defaults, **entry})
    return out


def known_models() -> list[str]:
    return sorted(_table())


VENDORS = ("anthropic/", "openai/")  # routers (OpenRouter, LiteLLM) spell models so


def model_info(name: str) -> ModelInfo:
    """The entry for `name`: itself, without a router's vendor prefix, or its family (the
    longest known name that prefixes it, e.g. a dated snapshot). One model, one entry, so
    prices, limits and the simulator's cache do not depend on how a model is spelled."""
    table = _table()
    bare = next((name[len(v) :] for v in VENDORS if name.startswith(v)), name)
    if bare in table:
        return table[bare]
    candidates = [k for k in table if bare.startswith(k + "-")]
    if candidates:
        return table[max(candidates, key=len)]
    raise ConfigError(
        f"unknown model {name!r}: Stoker has no cache facts for it. "
        f"Known models: {', '.join(known_models())}. Add it to stoker/cache/data/models.toml."
    )


def canonical_name(name: str) -> str:
    """The model's one name (a vendor prefix or a dated alias of a known model is that
    model's name); an unknown name as given."""
    try:
        return model_info(name).name
    except ConfigError:
        return name


def same_model(a: str, b: str) -> bool:
    """Whether two spellings name one model (a vendor prefix, a dated alias)."""
    return a == b or canonical_name(a) == canonical_name(b)


def fallback_info(name: str, provider: Literal["anthropic", "openai"]) -> ModelInfo:
    """Facts for a model the table does not know (a new snapshot, a self-hosted model):
    the provider's usual minimum, no price (cost is reported as unknown)."""
    try:
        return model_info(name)
    except ConfigError:
        if provider == "anthropic":
            return ModelInfo(
                name=name,
                provider="anthropic",
                min_cacheable=1024,
                read=0.1,
                write_5m=1.25,
                write_1h=2.0,
            )
        return ModelInfo(
            name=name,
            provider="openai",
            min_cacheable=1024,
            read=0.1,
            write_5m=1.0,
            write_1h=1.0,
            regime="L",
        )
