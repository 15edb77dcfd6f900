"""The tables the benches print: one layout, so every figure lines up the same way, and
nothing is cut on a narrow terminal: a figure that does not fit folds onto a second line
rather than ending in "…", and a row's name (a provider, a wire) keeps its whole width."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeVar

from rich.cells import cell_len
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
        table.add_column(column, justify="left" if column in labels else "right", overflow="fold")
    return table


def rows_table(
    title: str,
    rows: Iterable[R],
    cells: Mapping[str, Callable[[R], str]],
    *,
    labels: Collection[str] = (),
) -> Table:
    """A `figures_table` with a row per item of `rows`: each column's header is kept
    with the way it writes its cell, so the two never drift apart. A `labels` column is
    as wide as its widest name, on one line: the figures give way around it."""
    table = figures_table(title, cells, labels=labels)
    written = [[cell(row) for cell in cells.values()] for row in rows]
    for i, column in enumerate(table.columns):
        if column.header in labels and written:
            column.no_wrap = True
            column.min_width = max(cell_len(r[i]) for r in written)
    for texts in written:
        table.add_row(*texts)
    return table
