"""Spans from a trace file: OTLP JSON, as an OpenTelemetry Collector's file exporter and
OpenTelemetry's own JSON file exporter (`opentelemetry-exporter-otlp-json-file`) write it.

Each line is one `ExportTraceServiceRequest` in OTLP's JSON encoding: `resourceSpans`,
each with its resource's attributes and `scopeSpans`, each with `spans`. Ids are hex,
times are nanoseconds since the epoch (as strings: 64-bit integers), attribute values
are typed (`stringValue`, `intValue` as a string, `doubleValue`, `boolValue`,
`arrayValue`). A file holding one such document over several lines (a collector's
`format: json` with pretty printing, or a hand-saved export) reads the same. A file
that is not OTLP JSON is a `WireError` naming the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stoker.errors import WireError

AttributeValue = str | int | float | bool | list[Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """One span, with its attributes and its resource's (`service.name`, ...) as plain values."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int  # OTLP's SpanKind: 1 internal, 2 server, 3 client, ...
    start: float  # seconds since the epoch
    end: float
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    resource: dict[str, AttributeValue] = field(default_factory=dict)
    order: int = 0  # its place in the file: ties in time keep the order it was written

    def get(self, key: str) -> AttributeValue:
        return self.attributes.get(key)

    def number(self, *keys: str) -> int | None:
        """The first of `keys` that holds a number, as an int (None: none does)."""
        for key in keys:
            value = self.attributes.get(key)
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                return int(value)
            if isinstance(value, str) and value.lstrip("-").isdigit():
                return int(value)
        return None

    def text(self, *keys: str) -> str | None:
        for key in keys:
            value = self.attributes.get(key)
            if isinstance(value, str) and value:
                return value
        return None


def _value(typed: Any) -> AttributeValue:
    """An OTLP `AnyValue` as a plain value."""
    if not isinstance(typed, dict):
        return None
    if "stringValue" in typed:
        return str(typed["stringValue"])
    if "intValue" in typed:
        return int(typed["intValue"])
    if "doubleValue" in typed:
        return float(typed["doubleValue"])
    if "boolValue" in typed:
        return bool(typed["boolValue"])
    if "arrayValue" in typed:
        return [_value(v) for v in (typed["arrayValue"] or {}).get("values", ())]
    return None


def _attributes(items: Any) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _value(item.get("value"))
    return out


def _seconds(nanos: Any) -> float:
    try:
        return int(nanos) / 1e9
    except (TypeError, ValueError):
        return 0.0


def _documents(text: str, path: str) -> Iterator[dict[str, Any]]:
    stripped = text.strip()
    if not stripped:
        return
    try:  # one document over several lines
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        yield whole
        return
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise WireError(
                f"{path}, line {n}: not JSON ({exc}); `stoker audit` reads OTLP JSON, one "
                "export per line, as a collector's file exporter writes it"
            ) from exc
        if not isinstance(doc, dict):
            raise WireError(f"{path}, line {n}: a JSON {type(doc).__name__}, not an export")
        yield doc


def parse_spans(text: str, *, path: str = "<trace>") -> list[Span]:
    """Every span in `text` (OTLP JSON lines), in the order written."""
    spans: list[Span] = []
    found_any = False
    for doc in _documents(text, path):
        resource_spans = doc.get("resourceSpans")
        if not isinstance(resource_spans, list):
            continue
        found_any = True
        for rs in resource_spans:
            if not isinstance(rs, dict):
                continue
            resource = _attributes((rs.get("resource") or {}).get("attributes"))
            for scope in rs.get("scopeSpans") or ():
                for raw in (scope or {}).get("spans") or ():
                    if not isinstance(raw, dict):
                        continue
                    spans.append(
                        Span(
                            trace_id=str(raw.get("traceId", "")),
                            span_id=str(raw.get("spanId", "")),
                            parent_id=str(raw.get("parentSpanId", "") or ""),
                            name=str(raw.get("name", "")),
                            kind=int(raw.get("kind", 0) or 0),
                            start=_seconds(raw.get("startTimeUnixNano")),
                            end=_seconds(raw.get("endTimeUnixNano")),
                            attributes=_attributes(raw.get("attributes")),
                            resource=resource,
                            order=len(spans),
                        )
                    )
    if not found_any and text.strip():
        raise WireError(
            f"{path}: no `resourceSpans` in it; `stoker audit` reads traces in OTLP JSON "
            "(a collector's file exporter, or opentelemetry-exporter-otlp-json-file)"
        )
    return spans


def read_spans(path: Path) -> list[Span]:
    """Every span in the trace file at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WireError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise WireError(f"{path} is not UTF-8 text: is it OTLP protobuf, not JSON?") from exc
    return parse_spans(text, path=str(path))
