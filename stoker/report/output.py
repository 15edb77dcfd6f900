"""`stoker report` as one library call: read the store, price, write the files asked for."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stoker.cache.prices import PriceBook
from stoker.config import Config
from stoker.errors import ConfigError
from stoker.report.build import Report, build_report
from stoker.report.html import render_html
from stoker.report.png import write_png
from stoker.store import open_store


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    report: Report
    html: Path | None = None
    png: Path | None = None


def report_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)


def _write(path: Path, what: str, write: Callable[[Path], object]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except ModuleNotFoundError as exc:  # the charting libraries are an optional extra
        raise ConfigError(f"the {what} needs {exc.name}: pip install 'stoker[report]'") from exc
    except OSError as exc:
        raise ConfigError(f"cannot write the {what} to {path}: {exc.strerror or exc}") from exc


def write_files(report: Report, *, html: Path | None = None, png: Path | None = None) -> Written:
    """Write `report`'s HTML page and PNG chart where paths are given."""
    if html is not None:
        _write(html, "HTML report", lambda p: p.write_text(render_html(report), encoding="utf-8"))
    if png is not None:
        _write(png, "PNG chart", lambda p: write_png(report, p))
    return Written(report=report, html=html, png=png)


async def write_report(
    config: Config,
    session_id: str | None,
    *,
    html: Path | None = None,
    png: Path | None = None,
) -> Written:
    """The report of `session_id`'s tree (every tree when None) from `config`'s database,
    priced by `config`'s prices file over the catalogue; the HTML and PNG written when
    their paths are given."""
    prices = PriceBook.load(config.prices_file)
    store = open_store(config.database)
    try:
        report = await build_report(store, session_id, prices=prices)
    finally:
        await store.close()
    return write_files(report, html=html, png=png)
