"""Rich tables for cache records: the same view in the demo, `run` and reports."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from stoker.config import redact_dsn
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


def cost_text(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.5f}"


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
