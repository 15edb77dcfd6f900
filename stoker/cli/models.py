"""`stoker models`: the models Stoker knows, the names `--model`, `/model` and the
simulator take, each with the cache facts and price it is planned and billed by."""

from __future__ import annotations

import json

import click
from rich.table import Table

from stoker.cache.models import FAMILIES, ModelInfo, find_models, known_models, model_info
from stoker.cli.errors import fail
from stoker.cli.options import json_option
from stoker.cli.render import console
from stoker.wire.figures import json_usd


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"${value:g}"


def models_table(infos: list[ModelInfo]) -> Table:
    """One row a model: its name, whose cache rules it follows, the shortest prefix it
    caches, and its price per million input and output tokens."""
    table = Table(title="models", title_justify="left")
    for name, justify in (
        ("model", "left"),
        ("rules", "left"),
        ("cached from", "right"),
        ("input /M", "right"),
        ("output /M", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=name == "model")  # type: ignore[arg-type]
    for info in infos:
        table.add_row(
            info.name,
            info.provider,
            f"{info.min_cacheable:,}",
            _rate(info.input),
            _rate(info.output),
        )
    return table


@click.command()
@click.argument(
    "pattern",
    default="",
    help="Only models whose name holds PATTERN (any case), or matches it as a glob when "
    "it has * ? or [ (claude-*).",
)
@click.option(
    "--provider",
    default="",
    metavar="NAME",
    show_default=False,
    help=f"Only models that follow these cache rules: {', '.join(FAMILIES)}.",
)
@json_option
def models(pattern: str, provider: str, as_json: bool) -> None:
    """The models Stoker knows, with their cache rules and prices.

    Any of them names a model for --model, /model and the simulator. A model on a real
    provider that is not listed still runs: its provider's usual cache rules apply, and
    prices.toml in the Stoker home prices it."""
    family = provider.strip().rstrip(":").lower()  # `anthropic:` as a provider spec spells it
    if family and family not in FAMILIES:
        fail(f"--provider {provider!r}: the rules are {', '.join(FAMILIES)}", code=2)
    infos = [model_info(name) for name in find_models(pattern, family)]
    if as_json:
        rows = [
            {
                "model": i.name,
                "rules": i.provider,
                "min_cacheable": i.min_cacheable,
                "input_usd_per_million": json_usd(i.input),
                "output_usd_per_million": json_usd(i.output),
            }
            for i in infos
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    if not infos:
        asked = " and ".join(
            f for f in (pattern and f"matches {pattern!r}", family and f"follows {family}") if f
        )
        fail(f"no known model {asked}; `stoker models` lists all {len(known_models())}")
    console.print(models_table(infos))
