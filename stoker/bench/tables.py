"""The tables the benches print: one layout, so every figure lines up the same way."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeVar

from rich.console import JustifyMethod
from rich.table import Table

R = TypeVar("R")


def figures_table(
    title: str,
    columns: Iterable[str],
    *,
    labels: Collection[str] = (),
    title_justify: JustifyMethod = "left",
) -> Table:
    """A table whose `labels` columns (what a row is: a phase, a provider) read flush
    left and whose other columns, the figures, line up flush right."""
    table = Table(title=title, title_justify=title_justify)
    for column in columns:
        table.add_column(column, justify="left" if column in labels else "right")
    return table


def rows_table(
    title: str,
    rows: Iterable[R],
    cells: Mapping[str, Callable[[R], str]],
    *,
    labels: Collection[str] = (),
) -> Table:
    """A `figures_table` with a row per item of `rows`: each column's header is kept
    with the way it writes its cell, so the two never drift apart."""
    table = figures_table(title, cells, labels=labels)
    for row in rows:
        table.add_row(*(cell(row) for cell in cells.values()))
    return table
