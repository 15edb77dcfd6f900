"""The report as a PNG for pasting into an issue: matplotlib, drawn off-screen (Agg).

The same numbers as the HTML chart (`stoker.report.series`) over every call of the
report: tokens per call stacked by bucket with misses marked, and the cumulative cost
with the cache against the cost with none. Calls are counted in whole numbers, the
tallest stack and its miss mark fit under the top of the plot, and the legend names
only what is drawn (no "miss" entry when nothing missed).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stoker.report.build import Report
from stoker.report.series import BUCKETS, COST_COLOR, MISS_COLOR, NO_CACHE_COLOR, series

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WIDTH, HEIGHT, DPI = 1600, 900, 100
"""Pixels: wide enough for a few hundred calls, the shape an issue tracker shows whole."""
HEADROOM = 1.12
"""The token axis reaches this far past the tallest stack: room for its miss mark."""


def chart(report: Report) -> Figure:
    """`report` drawn on a WIDTH x HEIGHT figure: tokens above, cumulative cost below."""
    # matplotlib imports numpy and takes a second: only a report that draws pays for it.
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    calls = report.calls
    s = series(calls)
    x = list(s.numbers)
    fig = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI, layout="constrained")
    tokens, money = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    bottom = [0] * len(x)
    for key, label, color in BUCKETS:
        tokens.bar(x, s.tokens[key], bottom=bottom, label=label, color=color, width=0.8)
        bottom = [b + t for b, t in zip(bottom, s.tokens[key], strict=True)]
    if s.misses:
        index = {n: i for i, n in enumerate(s.numbers)}
        miss_x = [x[index[n]] for n in s.misses]
        tokens.scatter(
            miss_x, s.miss_heights, marker="v", s=80, color=MISS_COLOR, label="miss", zorder=3
        )
    tokens.set_ylim(0, max([*bottom, 1]) * HEADROOM)
    tokens.set_xlim(0.4, max(len(x), 1) + 0.6)
    tokens.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    tokens.set_ylabel("input tokens")
    tokens.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    u = report.usage
    tokens.set_title(
        f"{len(calls)} {'call' if len(calls) == 1 else 'calls'} · hit ratio {u.hit_ratio:.1%} · "
        f"cost {report.cost} · no cache {report.no_cache_cost} · "
        f"saved ${report.savings_usd:,.5f}"
    )
    money.plot(x, s.cumulative_cost, color=COST_COLOR, marker=".", label="cost with the cache")
    money.plot(
        x, s.cumulative_no_cache, color=NO_CACHE_COLOR, marker=".", label="cost with no cache"
    )
    money.set_ylabel("cumulative USD")
    money.set_xlabel("call, in the order made")
    money.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def write_png(report: Report, path: Path) -> None:
    """Draw `report` into `path` (WIDTH x HEIGHT pixels)."""
    chart(report).savefig(path, format="png", dpi=DPI)
