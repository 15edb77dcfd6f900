"""Prices: the genai-prices catalogue covers Stoker's models with their cache prices, the
user's prices.toml adds or overrides models, and a missing price names that file."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.cache.models import known_models, model_info
from stoker.cache.prices import SELF_HOSTED, Price, PriceBook, Rates
from stoker.cache.pricing import CostTotal, cost_usd, sum_costs, uncached_cost_usd
from stoker.config import Config
from stoker.errors import ConfigError, UnknownPrice
from stoker.providers.select import select_provider
from stoker.wire.usage import Usage

# Models in data/models.toml that genai-prices 0.2.3 does not list. When a newer catalogue
# prices them this test fails, and the set shrinks: nothing is priced by guess meanwhile.
NOT_IN_CATALOGUE = {"claude-mythos-5-1", "gpt-6"}

USAGE = Usage(uncached=1_000, written_5m=2_000, written_1h=3_000, read=40_000, output=500)


def test_the_catalogue_prices_every_listed_model_but_the_named_ones() -> None:
    unpriced = {m for m in known_models() if model_info(m).price is None}
    assert unpriced == NOT_IN_CATALOGUE
    for name in set(known_models()) - unpriced:
        info = model_info(name)
        if info.provider == "local":  # a self-hosted model costs nothing per token
            assert info.price == SELF_HOSTED
            continue
        assert info.price.source.startswith("genai-prices 0.2.3")  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"])
def test_anthropic_cache_prices_follow_the_provider_multipliers(name: str) -> None:
    info = model_info(name)
    assert info.price is not None
    r = info.price.rates
    assert (r.cache_read, r.cache_write, r.cache_write_1h) == pytest.approx(
        (r.input * 0.1, r.input * 1.25, r.input * 2.0)
    )
    assert (info.read, info.write_5m, info.write_1h) == pytest.approx((0.1, 1.25, 2.0))
    expected = (
        USAGE.uncached * r.input
        + USAGE.written_5m * r.input * 1.25
        + USAGE.written_1h * r.input * 2.0
        + USAGE.read * r.input * 0.1
        + USAGE.output * r.output
    ) / 1_000_000
    assert cost_usd(USAGE, info) == pytest.approx(expected)
    assert uncached_cost_usd(USAGE, info) == pytest.approx(
        (USAGE.input_total * r.input + USAGE.output * r.output) / 1_000_000
    )


def test_openai_reads_are_discounted_and_older_writes_billed_as_input() -> None:
    info = model_info("gpt-5")
    assert info.price is not None
    r = info.price.rates
    assert r.cache_read is not None
    assert r.cache_read < r.input
    assert info.write_5m == info.write_1h == 1.0


def test_a_long_context_call_pays_its_tier() -> None:
    price = Price(
        rates=Rates(input=1.0, output=2.0),
        tiers=((200_000, Rates(input=2.0, output=4.0)),),
    )
    assert price.cost(Usage(uncached=200_000)) == pytest.approx(0.2)
    assert price.cost(Usage(uncached=200_001)) == pytest.approx(200_001 * 2.0 / 1e6)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_an_override_prices_a_private_model_and_wins_over_the_catalogue(tmp_path: Path) -> None:
    book = PriceBook.load(
        _write(
            tmp_path / "prices.toml",
            '[models."acme-private-7b"]\ninput = 0.5\noutput = 1.5\ncache_read = 0.05\n'
            '[models."claude-sonnet-4-6"]\ninput = 2.0\noutput = 10.0\n'
            "cache_read = 0.2\ncache_write = 2.5\ncache_write_1h = 4.0\n",
        )
    )
    private = book.require("acme-private-7b", "openai")
    assert private.rates == Rates(input=0.5, output=1.5, cache_read=0.05)
    assert private.source == str(tmp_path / "prices.toml")
    # Unpriced cache tokens are billed as input: 1,000 + 2,000 + 3,000 at 0.5, reads at 0.05.
    assert private.cost(USAGE) == pytest.approx((6_000 * 0.5 + 40_000 * 0.05 + 500 * 1.5) / 1e6)
    assert book.require("anthropic/claude-sonnet-4-6", "anthropic").rates.input == 2.0
    # A model the file does not name keeps the catalogue's price.
    assert book.require("claude-haiku-4-5", "anthropic") == model_info("claude-haiku-4-5").price


def test_providers_price_by_the_homes_override_file(tmp_path: Path) -> None:
    _write(tmp_path / "prices.toml", '[models."gpt-6"]\ninput = 3.0\noutput = 12.0\n')
    config = Config.from_env({"STOKER_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-prices-0"})
    assert config.prices_file == tmp_path / "prices.toml"
    for spec in ("sim:gpt-6", "openai:gpt-6", "openai-compatible:http://127.0.0.1:9/v1#gpt-6"):
        choice = select_provider(spec, config=config)
        info = choice.provider.model_info("gpt-6")
        assert info.price is not None, spec
        assert (info.input, info.output) == (3.0, 12.0)
    # Without the file the same model has no price, and its cost is unknown, not zero.
    bare = select_provider(
        "sim:gpt-6", config=Config.from_env({"STOKER_HOME": str(tmp_path / "x")})
    )
    assert cost_usd(USAGE, bare.provider.model_info("gpt-6")) is None


def test_an_unknown_model_names_the_override_file(tmp_path: Path) -> None:
    config = Config.from_env({"STOKER_HOME": str(tmp_path)})
    with pytest.raises(UnknownPrice) as caught:
        PriceBook.load(config.prices_file).require("acme-private-7b", "openai")
    message = str(caught.value)
    assert str(tmp_path / "prices.toml") in message
    assert '[models."acme-private-7b"]' in message
    assert caught.value.model == "acme-private-7b"
    assert isinstance(caught.value, ConfigError)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[models."m"]\ninput = 1.0\n', "needs at least `input` and `output`"),
        ('[models."m"]\ninput = 1.0\noutput = 2\ncache_reads = 1\n', "unknown keys"),
        ('[models."m"]\ninput = "cheap"\noutput = 2\n', "must be numbers"),
        ('[models."m"]\ninput = -1\noutput = 2\n', "finite and not negative"),
        ('[models."m"]\ninput = inf\noutput = 2\n', "finite and not negative"),
        ("models = 3\n", "expected [models"),
        ("[models\n", "cannot read the price overrides"),
    ],
)
def test_a_bad_override_file_says_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    path = _write(tmp_path / "prices.toml", text)
    with pytest.raises(ConfigError) as caught:
        PriceBook.load(path)
    assert says in str(caught.value)
    assert str(path) in str(caught.value)


@given(st.text(max_size=200))
def test_any_override_file_loads_or_fails_with_a_config_error(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prices.toml"
        path.write_text(text, encoding="utf-8")
        try:
            book, error = PriceBook.load(path), ""
        except ConfigError as exc:
            book, error = PriceBook(), str(exc)
        assert not error or str(path) in error
        for price in book.overrides.values():
            values = [v for v in price.rates.to_dict().values() if v is not None]
            assert all(math.isfinite(v) and v >= 0 for v in values)


@given(st.lists(st.one_of(st.none(), st.floats(0, 10, allow_nan=False)), max_size=20))
def test_an_unknown_price_never_hides_the_known_totals(costs: list[float | None]) -> None:
    total = sum_costs(costs)
    known = [c for c in costs if c is not None]
    assert total.usd == pytest.approx(sum(known))
    assert (total.priced, total.unpriced) == (len(known), len(costs) - len(known))
    assert str(total).startswith(f"${sum(known):.5f}")
    assert ("with no price" in str(total)) == (total.unpriced > 0)


def test_a_cost_total_says_how_many_calls_it_could_not_price() -> None:
    assert str(CostTotal(usd=0.5, priced=2, unpriced=1)) == "$0.50000 (+1 call with no price)"


def test_the_documented_override_example_loads(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parent.parent / "docs" / "concepts" / "records.md"
    (example,) = re.findall(r"```toml\n(\[models\..*?)```", docs.read_text(), flags=re.S)
    book = PriceBook.load(_write(tmp_path / "prices.toml", example))
    assert book.require("my-private-model", "openai").rates == Rates(
        input=0.5, output=1.5, cache_read=0.05, cache_write=0.625, cache_write_1h=1.0
    )
