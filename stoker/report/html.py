"""The report as one self-contained HTML file: plotly's library inline (once), a chart per
lineage tree, the totals and every miss. It opens from disk with no network.

Figures a test or a script may want to read carry `data-` attributes with the exact
numbers (`#savings[data-usd]`), and each chart is a plotly graph whose traces hold the
per-call tokens, so what is drawn is what was recorded.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from html import escape

from stoker.report.build import LineageReport, Report, WhatIf
from stoker.report.series import BUCKETS, COST_COLOR, MISS_COLOR, NO_CACHE_COLOR, series

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
.figures { display: flex; gap: 2em; flex-wrap: wrap; }
.figure { background: #f5f5f5; padding: .6em 1em; border-radius: 6px; }
.figure b { display: block; font-size: 1.4em; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
td, th { border-bottom: 1px solid #ddd; padding: .3em .5em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.unpriced { color: #b71c1c; }
"""


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.5f}"


def _figure(lineage: LineageReport, *, div_id: str, with_library: bool) -> str:
    # plotly imports numpy and takes a second: only a report that draws pays for it.
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    s = series(lineage.calls)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.62, 0.38],
        vertical_spacing=0.08,
        subplot_titles=("input tokens per call", "cumulative cost (USD)"),
    )
    for key, label, color in BUCKETS:
        fig.add_trace(
            go.Bar(
                x=s.numbers, y=s.tokens[key], name=label, marker_color=color,
                hovertext=s.labels, meta=key,
            ),
            row=1, col=1,
        )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=s.misses, y=s.miss_heights, mode="markers", name="miss",
            marker={"symbol": "triangle-down", "size": 12, "color": MISS_COLOR}, meta="miss",
        ),
        row=1, col=1,
    )  # fmt: skip
    for values, label, color, key in (
        (s.cumulative_cost, "cost with the cache", COST_COLOR, "cost"),
        (s.cumulative_no_cache, "cost with no cache", NO_CACHE_COLOR, "no_cache"),
    ):
        fig.add_trace(
            go.Scatter(
                x=s.numbers, y=values, mode="lines+markers", name=label,
                line={"color": color}, meta=key,
            ),
            row=2, col=1,
        )  # fmt: skip
    fig.update_layout(barmode="stack", height=640, margin={"t": 40, "l": 60, "r": 20, "b": 40})
    fig.update_xaxes(title_text="call, in the order made", row=2, col=1)
    if len(s.numbers) <= 40:
        fig.update_xaxes(dtick=1)  # whole calls, not 1.5
    html: str = fig.to_html(
        full_html=False,
        include_plotlyjs=with_library,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )
    return html


def _misses(lineage: LineageReport) -> str:
    if not lineage.misses:
        return "<p>No misses: every call read what the previous one left cached.</p>"
    rows = "".join(
        f"<tr><td class=n>{m.call}</td><td>{escape(m.explanation)}</td>"
        f"<td class=n data-usd='{m.cost_usd}'>{_usd(m.cost_usd)}</td>"
        f"<td class=n data-usd='{m.saving_usd}'>{_usd(m.saving_usd)}</td>"
        f"<td class=n>{m.read_with_fix:,}</td>"
        f"<td>{escape(m.fix)}{'' if m.replayed else ' (estimated from this call)'}</td></tr>"
        for m in lineage.misses
    )
    return (
        "<table class=misses><tr><th>call</th><th>why</th><th>it cost</th>"
        "<th>the fix saves</th><th>read with the fix</th><th>fix</th></tr>"
        f"{rows}</table>"
    )


def _sessions(lineage: LineageReport) -> str:
    rows = "".join(
        f"<tr data-session='{escape(r.session.id)}'><td>{escape(r.session.role)}</td>"
        f"<td>{escape(r.session.id)}</td><td class=n>{len(r.calls)}</td>"
        f"<td class=n>{r.usage.hit_ratio:.1%}</td><td class=n>{escape(str(r.cost))}</td>"
        f"<td class=n>{escape(str(r.no_cache_cost))}</td>"
        f"<td class=n>${r.savings_usd:,.5f}</td></tr>"
        for r in lineage.by_session()
    )
    return (
        "<table class=sessions><tr><th>role</th><th>session</th><th>calls</th>"
        "<th>hit ratio</th><th>cost</th><th>with no cache</th><th>saved</th></tr>"
        f"{rows}</table>"
    )


def _notes(notes: tuple[str, ...]) -> str:
    if not notes:
        return ""
    return "<ul class=notes>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"


def _what_ifs(found: tuple[WhatIf, ...], cls: str) -> str:
    rows = "".join(
        f"<tr><td>{escape(w.name)}</td><td class=n data-usd='{w.saving_usd}'>"
        f"{_usd(w.saving_usd)}</td><td>{escape(w.detail)}</td></tr>"
        for w in found
    )
    if not rows:
        return ""
    return (
        f"<table class={cls}><tr><th>with</th><th>would have saved</th><th>how</th></tr>"
        f"{rows}</table>"
    )


def _lineage(lineage: LineageReport, index: int, *, of_several: bool) -> str:
    """One tree's section. Its own what-ifs only when the page has other trees: with one,
    they are the page's "What Stoker would have saved" table, already shown at the top."""
    u = lineage.usage
    calls = f"{len(lineage.calls)} call{'' if len(lineage.calls) == 1 else 's'}"
    roles = ", ".join(
        f"{n} {r}" for r, n in sorted(Counter(s.role for s in lineage.sessions).items())
    )
    heading = lineage.title or lineage.root_id
    # an audited conversation's title is its id: said once
    session = "" if heading == lineage.root_id else f"session {escape(lineage.root_id)} · "
    own_what_ifs = (
        f"<h3>What Stoker would have saved here</h3>{_what_ifs(lineage.what_if, 'what-if')}"
        if of_several and lineage.what_if
        else ""
    )
    checked = (
        "The exact accountant, replaying these calls, reproduces every recorded figure."
        if lineage.replay_checked
        else "These calls could not be replayed exactly; miss costs come from each call's tokens."
    )
    return (
        f"<section class=lineage id='lineage-{index}' data-root='{escape(lineage.root_id)}'>"
        f"<h2>{escape(heading)}</h2>"
        f"<p>{session}{roles} · {calls} · "
        f"hit ratio {u.hit_ratio:.1%} · cost {escape(str(lineage.cost))} · "
        f"with no cache {escape(str(lineage.no_cache_cost))} · "
        f"saved <span class=saved data-usd='{lineage.savings_usd}'>"
        f"${lineage.savings_usd:,.5f}</span>. {checked}</p>"
        f"{_figure(lineage, div_id=f'chart-{index}', with_library=index == 0)}"
        f"<h3>Sessions</h3>{_sessions(lineage)}"
        f"{_notes(lineage.notes)}"
        f"<h3>Misses</h3>{_misses(lineage)}{own_what_ifs}</section>"
    )


def render_html(report: Report) -> str:
    """The whole page."""
    u = report.usage
    unpriced = "".join(
        f"<p class=unpriced>{escape(str(e)).replace(chr(10), '<br>')}</p>" for e in report.unpriced
    )
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(report.title)}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>{escape(report.title)}</h1><p>{escape(report.source)}"
        f"{' · ' if report.source else ''}generated {generated}</p>"
        "<div class=figures>"
        f"<div class=figure>saved by the cache<b id=savings data-usd='{report.savings_usd}'>"
        f"${report.savings_usd:,.5f}</b></div>"
        f"<div class=figure>cost<b id=cost data-usd='{report.cost.usd}'>"
        f"{escape(str(report.cost))}</b></div>"
        f"<div class=figure>with no cache<b id=no-cache data-usd='{report.no_cache_cost.usd}'>"
        f"{escape(str(report.no_cache_cost))}</b></div>"
        f"<div class=figure>hit ratio<b id=hit-ratio data-ratio='{u.hit_ratio}'>"
        f"{u.hit_ratio:.1%}</b></div>"
        f"<div class=figure>calls<b id=calls>{len(report.calls)}</b></div>"
        "</div>"
        f"{unpriced}{_notes(report.notes)}"
        + (
            f"<h2>What Stoker would have saved</h2>{_what_ifs(report.what_if, 'what-ifs')}"
            if report.what_if
            else ""
        )
        + "".join(
            _lineage(lineage, i, of_several=len(report.lineages) > 1)
            for i, lineage in enumerate(report.lineages)
        )
        + "</body></html>"
    )
