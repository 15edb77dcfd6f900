"""What Stoker knows about each model: cache minimums, regimes and what input it takes
(images or text only) from data, prices from the genai-prices catalogue
(`stoker.cache.prices`).

The table lives in `data/models.toml` so a new model is a data edit. A dated snapshot
name (`claude-sonnet-4-6-20260101`) resolves to its family entry.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Literal, get_args

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
    # The cache rules the planner, the time policy and the simulator read (the model
    # table's header says what each means; docs/provider-caching.md where each comes from).
    lookback: int = 0  # positions a read searches back from a breakpoint (0: no markers)
    markers: int = 0  # explicit breakpoints a request may carry
    ttls: tuple[str, ...] = ()  # TTLs a marker may ask for, shortest first ("5m", "1h")
    min_output: int = 0  # the smallest max_tokens a request may ask for (a keep-warm's)
    implicit: Literal["", "units", "grid", "parts"] = ""  # how an automatic cache stores prefixes
    unit: int = 1  # tokens per stored unit of an implicit cache
    idle_ttl: float | None = None  # seconds an unused implicit entry lives
    endpoints: tuple[str, ...] = ()  # a router's upstream providers, one cache each
    catalogue: str | None = None  # "provider:model" genai-prices knows the price under
    cache_key: bool = False  # requests carry a key that keeps a lineage on one cache
    warm_by_read: bool = False  # a read restarts an implicit entry's idle timer (a ping keeps it)
    storage: float | None = None  # explicit cache objects: USD per million token-hours stored

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
    if r.input == 0:  # a free model: keep the usual ratios for the time policy
        return replace(info, price=price)
    read = 1.0 if r.cache_read is None else r.cache_read / r.input
    if info.provider == "openai" and info.regime != "N":
        write_5m = write_1h = info.write_5m  # writes are free: reported as plain input
    else:
        write_5m = 1.0 if r.cache_write is None else r.cache_write / r.input
        write_1h = write_5m if r.cache_write_1h is None else r.cache_write_1h / r.input
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


def _facts(fields: dict[str, Any]) -> dict[str, Any]:
    """A table entry's fields as `ModelInfo` takes them (TOML lists as tuples)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}


def _catalogue_price(name: str, info: ModelInfo) -> Price | None:
    """The catalogue's price of a table entry: under its `catalogue` reference if it has
    one (a router's spelling of another provider's model), else its own name and family."""
    if info.catalogue:
        provider, _, model = info.catalogue.partition(":")
        return catalogue_price(model, provider)
    return catalogue_price(name, info.provider)


@cache
def _table() -> dict[str, ModelInfo]:
    raw = _raw()
    out: dict[str, ModelInfo] = {}
    for name, entry in raw["models"].items():
        defaults: dict[str, Any] = raw[f"{entry['provider']}_defaults"]
        fields = _facts({**defaults, **entry})
        # Bedrock serves a model under inference profiles too (`us.anthropic...`): the
        # same rules, each priced by its own name (regional profiles cost more).
        profiles = fields.pop("profiles", ())
        for spelled in (name, *(f"{p}.{name}" for p in profiles)):
            info = ModelInfo(name=spelled, **fields)
            out[spelled] = priced(info, _catalogue_price(spelled, info))
    return out


def known_models() -> list[str]:
    return sorted(_table())


FAMILIES: tuple[Family, ...] = get_args(Family)


def find_models(pattern: str = "", family: str = "") -> list[str]:
    """The known models whose name holds `pattern` (case-insensitive; a glob when it has
    `*`, `?` or `[`: `claude-*`) and, given a `family`, follow its cache rules."""
    wanted = pattern.lower()
    glob = any(c in wanted for c in "*?[")
    return [
        name
        for name in known_models()
        if (fnmatch.fnmatchcase(name.lower(), wanted) if glob else wanted in name.lower())
        and (not family or model_info(name).provider == family)
    ]


VENDORS = ("anthropic/", "openai/")  # routers (OpenRouter, LiteLLM) spell models so


def model_info(name: str) -> ModelInfo:
    """The entry for `name`: itself, without a router's vendor prefix, or its family (the
    longest known name that prefixes it, e.g. a dated snapshot). One model, one entry, so
    prices, limits and the simulator's cache do not depend on how a model is spelled."""
    table = _table()
    if name in table:  # a router's own spelling first (OpenRouter's `anthropic/claude-...`)
        return table[name]
    bare = next((name[len(v) :] for v in VENDORS if name.startswith(v)), name)
    if bare in table:
        return table[bare]
    candidates = [k for k in table if bare.startswith(k + "-")]
    if candidates:
        return table[max(candidates, key=len)]
    raise ConfigError(_unknown(name))


def _unknown(name: str) -> str:
    """What to do about a model the table lacks, without editing the installed package:
    pick a known one (the closest named), or run it on a real provider, which needs only
    a price."""
    close = closest_models(name)
    closest = f" (closest: {', '.join(close)})" if close else ""
    return (
        f"unknown model {name!r}: Stoker has no cache facts for it (minimum length, regime) "
        f"and the simulator plays only models it knows. Pick one{closest}: `stoker "
        "models` lists them, as does stoker.cache.models.known_models(). A model on a real "
        "provider (anthropic:, openai:, bedrock:, google:, openai-compatible:...) needs no "
        "entry: its provider's usual cache rules apply, and prices.toml in the Stoker home "
        "prices it."
    )


def _word(name: str) -> str:
    """A model name's first word, which names its family: gpt, claude, gemini, deepseek."""
    return re.split(r"[-./:]", name.lower(), maxsplit=1)[0]


def closest_models(name: str, n: int = 3) -> list[str]:
    """The known models nearest to `name`, nearest first: those whose first word is its
    own (`gpt-7`: the gpt models) before the rest, each by how alike the names are; the
    rest only when alike enough to be a typo of it. Of two as alike, the later name (the
    newer model, as a table sorted by name has it) comes first."""
    word = _word(name)
    alike = {k: difflib.SequenceMatcher(None, name, k).ratio() for k in known_models()}
    near = sorted((k for k, r in alike.items() if _word(k) == word or r >= 0.6), reverse=True)
    return sorted(near, key=lambda k: (_word(k) != word, -alike[k]))[:n]


def provider_spec(family: Family, model: str) -> str:
    """How a provider string (`stoker.providers.select`) names `model` of `family`."""
    return f"openai-compatible:URL#{model}" if family == "local" else f"{family}:{model}"


def family_guess(name: str) -> Family | None:
    """The family of the known models that share `name`'s first word (a newer model
    than the table's: `gpt-7` is OpenAI's), or None when none does."""
    same = [k for k in closest_models(name) if _word(k) == _word(name)]
    return model_info(same[0]).provider if same else None


def bare_model_message(name: str) -> str:
    """What `Agent(name)` says when `name` names no provider: the spellings that would
    work, most likely first. A known model: under its own family's provider. Another:
    the closest known models, each under its family's provider, then the name itself
    under the provider its first word suggests (a model newer than the table runs there
    by the provider's usual rules); the simulator's spelling comes after those."""
    head = f"Agent({name!r}) does not say which provider serves the model"
    try:
        info = model_info(name)
    except ConfigError:
        pass
    else:
        spec = provider_spec(info.provider, name)
        return f"{head}: write {spec!r} (or 'sim:{name}' on the simulator), or pass provider=..."
    listed = "(`stoker models` lists the models Stoker knows)"
    close = closest_models(name)
    family = family_guess(name)
    if not close and family is None:
        return (
            f"{head}, and Stoker knows no model {name!r}: write PROVIDER:MODEL (anthropic:, "
            "openai:, google:, bedrock:, openrouter:, deepseek: or "
            f"openai-compatible:URL#MODEL), or pass provider=... {listed}"
        )
    options = []
    if close:
        known = ", ".join(repr(provider_spec(model_info(k).provider, k)) for k in close)
        options.append(
            f"a model it knows, closest first: {known} (or 'sim:{close[0]}' on the simulator)"
        )
    if family is not None:
        options.append(
            f"{provider_spec(family, name)!r} to send it to {family} as it is (the "
            "provider's usual cache rules apply)"
        )
    return (
        f"{head}, and Stoker knows no model {name!r}. Write {'; or '.join(options)}; or pass "
        f"provider=... {listed}"
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
        usual = _facts({"min_cacheable": 1024, **_raw()[f"{provider}_defaults"]})
        usual.pop("profiles", None)
        if provider == "openai":
            usual["regime"] = "L"
        info = ModelInfo(name=name, provider=provider, **usual)
        return priced(info, catalogue_price(name, provider))
