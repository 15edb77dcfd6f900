"""What a model's tokens cost: the `genai-prices` catalogue, under the user's own overrides.

Prices change more often than cache rules, and a project whose only job is tracking them
(genai-prices, kept by the pydantic team, with cache read and 5-minute / 1-hour write
prices and long-context tiers) keeps them better than a table in this package. Stoker's
own table (`data/models.toml`) keeps what is not a price: minimums, regimes, intervals.
Upgrading `genai-prices` moves the prices; nothing here is fetched at run time.

A model the catalogue does not know (a private deployment, a model newer than the
installed catalogue) gets its price from the user's `prices.toml` (the `Config`'s
`prices_file`, `$STOKER_HOME/prices.toml` by default), which also wins over the catalogue
for the models it names (negotiated prices). USD per million tokens:

    [models."my-model"]
    input = 0.5             # uncached input
    output = 1.5
    cache_read = 0.05       # optional: reads are billed as input without it
    cache_write = 0.625     # optional: 5-minute writes (OpenAI: its one write price)
    cache_write_1h = 1.0    # optional: 1-hour writes; as cache_write without it
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, UnknownPrice
from stoker.wire.usage import Usage

_VENDORS = ("anthropic/", "openai/")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """USD per million tokens at one tier. A missing cache price bills those tokens as
    input, which is what genai-prices does too (OpenAI's writes before GPT-5.6 are free:
    they are reported as ordinary input, never as written)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None

    def cost(self, usage: Usage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        write_1h = write if self.cache_write_1h is None else self.cache_write_1h
        return (
            usage.uncached * self.input
            + usage.read * read
            + usage.written_5m * write
            + usage.written_1h * write_1h
            + usage.output * self.output
        ) / 1_000_000

    def to_dict(self) -> dict[str, float | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """A model's rates, the higher rates of its long-context tiers, and where they came
    from (said in reports, so a surprising figure can be traced)."""

    rates: Rates
    tiers: tuple[tuple[int, Rates], ...] = ()  # (input tokens above which, rates), ascending
    source: str = ""

    def at(self, input_tokens: int) -> Rates:
        """The rates a call with `input_tokens` of input pays (all of it, as genai-prices
        and the providers bill a long-context call)."""
        chosen = self.rates
        for start, rates in self.tiers:
            if input_tokens > start:
                chosen = rates
        return chosen

    def cost(self, usage: Usage) -> float:
        return self.at(usage.input_total).cost(usage)

    def uncached_cost(self, usage: Usage) -> float:
        """The same tokens with no cache at all: every input token at the input rate."""
        return self.cost(Usage(uncached=usage.input_total, output=usage.output))


def _tiers_of(model_price: Any) -> list[int]:
    starts: set[int] = set()
    for key in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"):
        value = getattr(model_price, key, None)
        starts.update(t.start for t in getattr(value, "tiers", ()) or ())
    return sorted(starts)


def _rates_of(model_price: Any, input_tokens: int) -> Rates | None:
    def rate(key: str) -> float | None:
        value = getattr(model_price, key, None)
        if value is None:
            return None
        if isinstance(value, Decimal):
            return float(value)
        chosen = value.base
        for tier in value.tiers:
            if input_tokens > tier.start:
                chosen = tier.price
        return float(chosen)

    input_, output = rate("input_mtok"), rate("output_mtok")
    if input_ is None or output is None:
        return None
    return Rates(
        input=input_,
        output=output,
        cache_read=rate("cache_read_mtok"),
        cache_write=rate("cache_write_mtok"),
        cache_write_1h=rate("cache_write_1h_mtok"),
    )


# Where the catalogue lists a family's prices, when under another name (Bedrock's are
# AWS's), and the families whose models have no per-token price at all.
_CATALOGUE_PROVIDER = {"bedrock": "aws"}
SELF_HOSTED = Price(
    rates=Rates(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0, cache_write_1h=0.0),
    source="self-hosted: no per-token price (what the cache saves is prefill time)",
)


@cache
def catalogue_price(model: str, provider: str) -> Price | None:
    """The installed genai-prices catalogue's price of `model` at `provider`
    ("anthropic", "openai", "bedrock", ...); None when it has none. Looked up in that
    provider's own list only: a self-hosted model named like a hosted one is not billed at
    another's price. A self-hosted ("local") model costs nothing per token."""
    if provider == "local":
        return SELF_HOSTED
    provider = _CATALOGUE_PROVIDER.get(provider, provider)
    from genai_prices import data_snapshot  # its data takes a quarter second to load

    bare = next((model[len(v) :] for v in _VENDORS if model.startswith(v)), model)
    try:
        _, found = data_snapshot.get_snapshot().find_provider_model(bare, None, provider, None)
    except LookupError:
        return None
    model_price = found.get_prices(datetime.now(UTC))
    base = _rates_of(model_price, 0)
    if base is None:
        return None
    tiers = []
    for start in _tiers_of(model_price):
        rates = _rates_of(model_price, start + 1)
        if rates is not None:
            tiers.append((start, rates))
    return Price(
        rates=base, tiers=tuple(tiers), source=f"genai-prices {version('genai-prices')}: {found.id}"
    )


_RATE_KEYS = {f.name for f in fields(Rates)}


def _override(name: str, entry: Any, path: Path) -> Price:
    if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
        raise ConfigError(
            f"{path}: [models.{name!r}] needs at least `input` and `output` "
            "(USD per million tokens)"
        )
    unknown = sorted(set(entry) - _RATE_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: [models.{name!r}] has unknown keys {unknown}; expected {sorted(_RATE_KEYS)}"
        )
    try:
        rates = Rates(**{k: float(v) for k, v in entry.items()})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [models.{name!r}]: prices must be numbers ({exc})") from exc
    if not all(math.isfinite(v) and v >= 0 for v in rates.to_dict().values() if v is not None):
        raise ConfigError(f"{path}: [models.{name!r}]: prices must be finite and not negative")
    return Price(rates=rates, source=str(path))


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceBook:
    """The user's overrides (by model name) over the catalogue. `path` is where the
    overrides live, named in every message about a missing price, even before the file
    exists; an empty book (no path) is the catalogue alone."""

    overrides: dict[str, Price] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, path: Path) -> PriceBook:
        """The overrides in `path`; none when the file does not exist yet."""
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path=path)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read the price overrides in {path}: {exc}") from exc
        models = raw.get("models", {})
        if not isinstance(models, dict):
            raise ConfigError(f'{path}: expected [models."NAME"] tables')
        return cls(
            overrides={name: _override(name, entry, path) for name, entry in models.items()},
            path=path,
        )

    def price(self, model: str, provider: str) -> Price | None:
        """The override for `model` (as named, or without a router's vendor prefix),
        else the catalogue's; None when neither has one."""
        bare = next((model[len(v) :] for v in _VENDORS if model.startswith(v)), model)
        found = self.overrides.get(model) or self.overrides.get(bare)
        return found if found is not None else catalogue_price(bare, provider)

    def require(self, model: str, provider: str) -> Price:
        """The price of `model`, or `UnknownPrice` saying where to add one."""
        found = self.price(model, provider)
        if found is None:
            raise UnknownPrice(model, self.path)
        return found
