"""`stoker audit FILE`: what the prompt cache did, and cost, in traces an agent exported.

The traces are OpenTelemetry's, in the GenAI semantic conventions, as a collector's file
exporter (or OpenTelemetry's JSON file exporter) writes them: OTLP JSON, one export a
line (`otlp`). The model calls among the spans, their cache usage and their
conversations come out of the conventions' attributes (`calls`); the report is the one
`stoker report` prints for Stoker's own sessions, with each miss's cause, what it cost,
its fix, and what Stoker's planner and time policy would have saved on that traffic
(`report`).
"""

from __future__ import annotations

from stoker.audit.otlp import Span, parse_spans, read_spans
from stoker.audit.report import audit_file, audit_spans

__all__ = ["Span", "audit_file", "audit_spans", "parse_spans", "read_spans"]
