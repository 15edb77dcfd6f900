#!/usr/bin/env python3
"""The trace the README and docs/proxy.md run `stoker audit` on, and its screenshot.

    .venv/bin/python scripts/audit_example.py          # docs/examples/audit-trace.jsonl
    .venv/bin/python scripts/audit_example.py --png    # and docs/images/audit.png

A code-review bot talks to Claude through the official Anthropic SDK, traced by
OpenTelemetry's Anthropic instrumentation into OpenTelemetry's own JSON file exporter, as
tests/test_audit.py traces it; the model is Stoker's simulator on a frozen clock, so every
run records the same usage at the same times. Five calls with the system prompt cached for
5 minutes: a second one a minute later reads it, then the user is away 9 minutes (the
entry expires), back for a minute, away 14 minutes (expires again).

Prompts and answers stay out of the file (`TRACELOOP_TRACE_CONTENT=false`, as a deployment
that does not export conversations runs it): the audit needs only usage and times. Trace
and span ids count up from 1 and the resource is the service name alone, so a new run
writes the same bytes until another version of the instrumentation names itself or records
more; what `stoker audit` reads of it must stay the same (tests/test_audit_example.py).

`--png` writes `stoker audit --html` of the trace to a page and photographs it with headless
Chromium (`/usr/bin/chromium`, or $STOKER_CHROMIUM; Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from stoker.clock import FrozenClock
from stoker.providers.sim.server import create_app, serve_in_background

ROOT = Path(__file__).resolve().parent.parent
TRACE = Path("docs/examples/audit-trace.jsonl")  # relative: the path the report shows
SCREENSHOT = ROOT / "docs" / "images" / "audit.png"

MODEL = "claude-sonnet-4-6"
SYSTEM = "You review pull requests for a Python team. " + "Keep every answer short. " * 600
# (seconds since the previous call, what the user says)
TURNS = (
    (0, "Review this diff"),
    (60, "And the tests?"),
    (9 * 60, "Back: anything else?"),
    (60, "Is the changelog right?"),
    (14 * 60, "One more look before merging?"),
)


class CountingIds(IdGenerator):
    """Trace and span ids 1, 2, 3, ... instead of random ones."""

    def __init__(self) -> None:
        self.last = 0

    def generate_span_id(self) -> int:
        self.last += 1
        return self.last

    def generate_trace_id(self) -> int:
        return self.generate_span_id()


@contextmanager
def _content_off() -> Iterator[None]:
    """The Anthropic instrumentation records no prompt or answer while the block runs."""
    saved = os.environ.get("TRACELOOP_TRACE_CONTENT")
    os.environ["TRACELOOP_TRACE_CONTENT"] = "false"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TRACELOOP_TRACE_CONTENT"]
        else:
            os.environ["TRACELOOP_TRACE_CONTENT"] = saved


def write_trace(path: Path) -> None:
    """The example conversation, traced into `path` (replaced if it exists)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    clock = FrozenClock()
    provider = TracerProvider(
        resource=Resource({"service.name": "code-review-bot"}), id_generator=CountingIds()
    )
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    instrumentor = AnthropicInstrumentor()
    wall_clock = sdk_trace.time_ns
    sdk_trace.time_ns = lambda: int(clock.now() * 1e9)  # span times follow the frozen clock
    instrumentor.instrument(tracer_provider=provider)
    try:
        with (
            _content_off(),
            serve_in_background(create_app(clock=clock)) as sim,
            anthropic.Anthropic(base_url=sim.url, api_key="sk-example", max_retries=0) as client,
        ):
            history: list[dict[str, object]] = []
            for gap, text in TURNS:
                clock.advance(gap)
                history.append({"role": "user", "content": [{"type": "text", "text": text}]})
                answer = client.messages.create(
                    model=MODEL,
                    max_tokens=64,
                    system=[
                        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
                    ],
                    messages=history,  # type: ignore[arg-type]
                )
                history.append(
                    {"role": "assistant", "content": [b.model_dump() for b in answer.content]}
                )
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        sdk_trace.time_ns = wall_clock


def screenshot(trace: Path, png: Path) -> None:
    """`stoker audit TRACE --html` photographed by headless Chromium into `png`."""
    chromium = os.environ.get("STOKER_CHROMIUM", "/usr/bin/chromium")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "audit.html"
        subprocess.run(
            [sys.executable, "-m", "stoker", "audit", str(trace), "--html", str(page)],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={Path(tmp) / 'profile'}",
                "--window-size=1280,1500",
                "--virtual-time-budget=5000",  # plotly draws the charts before the shot
                f"--screenshot={png}",
                page.as_uri(),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / TRACE, help="where the trace goes")
    parser.add_argument("--png", action="store_true", help=f"also write {SCREENSHOT}")
    args = parser.parse_args()
    write_trace(args.out)
    print(f"wrote {args.out}")
    if args.png:
        shown = TRACE if args.out.resolve() == ROOT / TRACE else args.out.resolve()
        screenshot(shown, SCREENSHOT)
        print(f"wrote {SCREENSHOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
