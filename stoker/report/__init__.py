"""`stoker report`: per session and per lineage tree, what the cache read and wrote, what it
saved, and what every miss cost; as tables, JSON, a self-contained HTML page and a PNG."""

from __future__ import annotations

from stoker.report.build import Call, LineageReport, Miss, Report, build_report

__all__ = ["Call", "LineageReport", "Miss", "Report", "build_report"]
