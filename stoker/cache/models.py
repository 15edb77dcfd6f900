"""What Stoker knows about each model: cache minimums, regimes and what input it takes
(images or text only) from data, prices from the genai-prices catalogue
(`stoker.cache.prices`).

The table lives in `data/models.toml` so a new model is a data edit. A dated snapshot
name (`claude-sonnet-4-6-20260101`) resolves to its family entry.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

from stoker.cache.prices import Price, PriceBook, catalogue_price
from stoker.errors import ConfigError


# Whose cache rules a model follows (`[<family>_defaults]` in the model table), which is
# also which API serves it in the simulator. Claude on Bedrock is "bedrock": Bedrock's
# minimums, TTLs and prices, its Converse API; the same model on OpenRouter "openrouter".
Family = Literal["anthropic", "openai", "google", "bedrock", "openrouter", "deepseek", "local"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """Cache-relevant facts about one model, and its price (None: unknown).

    `read`, `write_5m` and `write_1h` are the cache prices as multiples of the input
    price: the time policy weighs keep-warm requests with them, price or no price. With
    a price they are its own ratios; without one, the provider's usual ones."""

    name: str
    provider: Family
    min_cacheable: int
    read: float
    write_5m: float
    write_1h: float
    price: Price | None = None
    regime: Literal["L", "N"] | None = None
    interval: int = 128
    renders_thinking_before_tools: bool = False
    strips_thinking: bool = False
    retention_24h: bool = False
    context_window: int | None = None  # tokens a request may hold (None: unknown)
    images: bool = False  # takes image blocks; unknown means no (an image would be refused)
    tokenizer: Literal["estimate", "o200k_base", "cl100k_base"] = "estimate"  # stoker.cache.tokens
    reasons: bool = False  # OpenAI: a reasoning model (reasoning tokens, no `stop`/`logprobs`)

    @property
    def input(self) -> float | None:
        """USD per million uncached input tokens (below any long-context tier)."""
        return None if self.price is None else self.price.rates.input

    @property
    def output(self) -> float | None:
        return None if self.price is None else self.price.rates.output


def priced(info: ModelInfo, price: Price | None) -> ModelInfo:
    """`info` with `price`, and the cache multipliers that price implies (a cache price
    the price leaves out is billed as input: a multiple of 1)."""
    if price is None:
        return replace(info, price=None)
    r = price.rates
    read = 1.0 if r.cache_read is None else r.cache_read / r.input
    if info.provider == "openai" and info.regime != "N":
        write_5m = write_1h = info.write_5m  # writes are free: reported as plain input
    else:
        write_5m = 1.0 if r.cache_write is None else r.cache_write / r.input
        write_1h = write_5m if r.cache_write_1h is None else r.cache_write_1h / r.input
    if r.input == 0:  # a free model: keep the usual ratios for the time policy
        read, write_5m, write_1h = info.read, info.write_5m, info.write_1h
    return replace(info, price=price, read=read, write_5m=write_5m, write_1h=write_1h)


def with_prices(info: ModelInfo, prices: PriceBook | None, model: str = "") -> ModelInfo:
    """`info` priced by the user's overrides where they name the model (as `model` spells
    it or by its one name); otherwise as it is (the catalogue's price, or none)."""
    if prices is None or not prices.overrides:
        return info
    for name in dict.fromkeys(n for n in (model, info.name) if n):
        if name in prices.overrides or name.split("/", 1)[-1] in prices.overrides:
            return priced(info, prices.price(name, info.provider))
    return info


@cache
def _raw() -> dict[str, Any]:
    return tomllib.loads(resources.files("stoker.cache").joinpath("data/models.toml").read_text())


@cache
def _table() -> dict[str, ModelInfo]:
    raw = _raw()
    out: dict[str, ModelInfo] = {}
    for name, entry in raw["models"].items():
        defaults: dict[str, Any] = raw[f"{entry['provider']}_defaults"]
        info = ModelInfo(name=name, **{**defaults, **entry})
        out[name] = priced(info, catalogue_price(name, info.provider))
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
        f"unknown model {name!r}: Stoker has no cache facts for it (minimum length, regime). "
        f"Known models: {', '.join(known_models())}. Add it to stoker/cache/data/models.toml; "
        "a model served elsewhere (anthropic:, openai:, openai-compatible:) needs only a "
        "price, in prices.toml in the Stoker home."
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


def fallback_info(name: str, provider: Family) -> ModelInfo:
    """Facts for a model the table does not know (a new snapshot, a self-hosted model):
    the provider's usual minimum, and the catalogue's price if it has one (else the cost
    is reported as unknown, until the user's prices.toml names it)."""
    try:
        return model_info(name)
    except ConfigError:
        usual: dict[str, Any] = {"min_cacheable": 1024, **_raw()[f"{provider}_defaults"]}
        if provider == "openai":
            usual["regime"] = "L"
        info = ModelInfo(name=name, provider=provider, **usual)
        return priced(info, catalogue_price(name, provider))
