"""What several commands print alike: tables of cache records (the demo, `run`, reports)
and the note that says the answers come from the simulator (`run`, `chat`)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from stoker.cache.models import model_info
from stoker.config import Config, env_var, redact_dsn
from stoker.errors import ConfigError
from stoker.providers.select import is_simulator, spec_model
from stoker.wire.record import CacheRecord

_probe = Console()
# Piped output (make run, CI logs) gets a table wide enough to read, not 80 columns.
console = _probe if _probe.is_terminal else Console(width=120)


def no_sessions_yet(database: str) -> str:
    """What a command that reads sessions says when the database holds none."""
    return (
        f"no sessions yet in {redact_dsn(database)}: `stoker chat` stores one as it goes, "
        "as do `stoker run --session NAME ...` and `stoker demo --save`"
    )


def counted(n: int, noun: str, plural: str = "") -> str:
    """`n` and the noun in the number it takes: "1 call", "2 calls", "0 calls"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


COST_PLACES = 5  # on screen: a hundred-thousandth of a dollar (JSON keeps six: wire.figures)


def cost_text(value: float | None) -> str:
    """Money on screen, everywhere the CLI shows it: `$0.00112`, `-$0.00112` (never
    `$-0.00112`, nor a `-$0.00000` that rounds to nothing), `n/a` when unknown."""
    if value is None:
        return "n/a"
    shown = round(value, COST_PLACES) + 0.0  # -0.0 + 0.0 is 0.0
    return f"{'-' if shown < 0 else ''}${abs(shown):.{COST_PLACES}f}"


def saving_text(saved_usd: float) -> str:
    """What the cache saved against the same tokens sent with no cache, said truthfully
    when it is negative: a call that writes the prefix pays more than the input price
    for it (1.25x for Anthropic's 5 minutes), so until a later call reads it back the
    cache has cost more, and "saved -$0.00112" reads as a bug."""
    if round(saved_usd, COST_PLACES) >= 0:
        return f"saved {cost_text(saved_usd)}"
    return (
        f"cache writes cost {cost_text(-saved_usd)} more than no cache so far "
        "(they pay back from the next read)"
    )


def records_table(rows: Iterable[tuple[str, str, CacheRecord]], *, title: str) -> Table:
    """One line per provider call: (lineage label, turn label, record)."""
    table = Table(title=title, title_justify="left")
    for name, justify in (
        ("#", "right"),
        ("lineage", "left"),
        ("turn", "right"),
        ("uncached", "right"),
        ("written", "right"),
        ("read", "right"),
        ("hit ratio", "right"),
        ("cost", "right"),
        ("why", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, (lineage, turn, r) in enumerate(rows, 1):
        u = r.usage
        table.add_row(
            str(i),
            lineage,
            turn,
            str(u.uncached),
            str(u.written),
            str(u.read),
            f"{u.hit_ratio:.1%}",
            cost_text(r.cost_usd),
            r.explanation.verdict,
        )
    return table


SIMULATOR_NOTE = "answers come from Stoker's simulator"
"""How the simulator note starts (`simulator_note`)."""

# A model's family -> how a newcomer names it, and the provider kind serving it for real.
_REAL = {
    "anthropic": ("Anthropic", "anthropic"),
    "openai": ("OpenAI", "openai"),
    "google": ("Gemini", "google"),
}


def simulator_note(config: Config) -> str | None:
    """The line `stoker run` and `stoker chat` print once when `config`'s provider is the
    embedded simulator (None otherwise): "Understood: hello there" reads as broken until
    you know no model wrote it, and the fix is one option away."""
    if not is_simulator(config.provider):
        return None
    model = spec_model(config.provider) or config.model
    note = f"{SIMULATOR_NOTE} (sim:{model}): deterministic, no model behind them"
    try:
        family: str = model_info(model).provider
    except ConfigError:
        family = ""  # an unknown model: the command fails on it with its own message
    if family not in _REAL:
        return f"{note}; for a real model: --provider PROVIDER:MODEL (`stoker models` lists them)"
    name, kind = _REAL[family]
    return (
        f"{note}, cache figures by {name}'s rules; for a real model: "
        f"--provider {kind}:{model} with {env_var(kind + '_api_key')} set"
    )


def print_simulator_note(config: Config) -> None:
    """`simulator_note`, dim and on one line (the terminal wraps it), when there is one."""
    note = simulator_note(config)
    if note is not None:
        console.print(note, style="dim", markup=False, highlight=False, soft_wrap=True)
