"""`stoker audit FILE`: traces OpenTelemetry's own file exporter wrote, read back as a report.

Three sources, each written by `opentelemetry-exporter-otlp-json-file` (OTLP JSON, one
export a line, as a collector's file exporter writes it): a Stoker session exporting its
own spans, and the official Anthropic and OpenAI SDKs under OpenTelemetry's GenAI
instrumentations, both against the simulator. Span times follow the test's frozen clock
(the SDK's `time_ns` is patched), as a real run's follow the wall clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from stoker.agent.otel import OtelTelemetry
from stoker.audit import audit_file, parse_spans
from stoker.cache.models import model_info
from stoker.cache.prices import PriceBook
from stoker.cache.pricing import cost_usd, uncached_cost_usd
from stoker.cli import app
from stoker.clock import FrozenClock
from stoker.errors import WireError
from stoker.providers.sim.server import create_app, serve_in_background
from stoker.report import build_report
from stoker.store.sqlite import SQLiteStore
from stoker.wire.dialects.anthropic import parse_usage
from stoker.wire.usage import Usage
from tests.proxy_helpers import SYSTEM
from tests.test_report import PROMPTS, _agent


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FrozenClock:
    """A frozen clock the spans' start and end times follow."""
    frozen = FrozenClock()
    ticks = iter(range(10**9))
    monkeypatch.setattr(sdk_trace, "time_ns", lambda: int(frozen.now() * 1e9) + next(ticks))
    return frozen


@pytest.fixture
def exported(tmp_path: Path) -> Iterator[tuple[TracerProvider, Path]]:
    path = tmp_path / "trace.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "under-audit"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    yield provider, path
    provider.shutdown()


async def _session(db: Path, clock: FrozenClock, provider: TracerProvider) -> None:
    """`stoker report`'s expiry case: two turns ten minutes apart, 5-minute entries."""
    agent = dataclasses.replace(_agent(clock), telemetry=OtelTelemetry(provider))
    async with SQLiteStore(db) as store:
        session = await agent.open(store, "g")
        await session.send(PROMPTS[0])
        clock.advance(minutes=10)
        await session.send(PROMPTS[1])


async def test_a_stoker_sessions_trace_costs_what_stoker_report_says(
    tmp_path: Path, clock: FrozenClock, exported: tuple[TracerProvider, Path]
) -> None:
    provider, path = exported
    await _session(tmp_path / "s.db", clock, provider)
    provider.force_flush()
    async with SQLiteStore(tmp_path / "s.db") as store:
        stored = await build_report(store, "g", prices=PriceBook())
    audited = audit_file(path)
    assert len(audited.calls) == len(stored.calls) >= 2
    assert [c.usage for c in audited.calls] == [c.usage for c in stored.calls]
    assert audited.cost.usd == pytest.approx(stored.cost.usd)
    assert audited.no_cache_cost.usd == pytest.approx(stored.no_cache_cost.usd)
    assert audited.savings_usd == pytest.approx(stored.savings_usd)
    (lineage,), (reported,) = audited.lineages, stored.lineages
    assert [c.record.explanation.verdict == "expired" for c in lineage.calls] == [
        c.record.explanation.verdict == "expired" for c in reported.calls
    ]
    (miss,), (expected,) = lineage.misses, reported.misses
    assert (miss.call, miss.verdict, miss.read_with_fix) == (
        expected.call,
        "expired",
        expected.read_with_fix,
    )
    assert miss.cost_usd == pytest.approx(expected.cost_usd)
    assert miss.saving_usd == pytest.approx(expected.saving_usd)
    assert "600 s since the entry was last used, longer than its 300 s TTL" in miss.explanation
    (warm,) = audited.what_if
    assert warm.name == "Stoker's time policy"
    assert warm.saving_usd is not None
    assert warm.saving_usd > 0
    assert "1 of 1 expired gaps kept warm" in warm.detail


@contextmanager
def traced_sim(
    instrumentor: Any, provider: TracerProvider, clock: FrozenClock
) -> Iterator[tuple[str, str]]:
    """The served simulator on `clock` and a new API key for it, while `instrumentor`
    traces the SDK into `provider`; the spans are flushed after."""
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve_in_background(create_app(clock=clock)) as sim:
            yield sim.url, f"sk-test-{uuid.uuid4().hex}"
    finally:
        instrumentor.uninstrument()
    provider.force_flush()


def _claude(client: anthropic.Anthropic, history: list[dict[str, Any]], text: str) -> Usage:
    history.append({"role": "user", "content": [{"type": "text", "text": text}]})
    answer = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=64,
        system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        messages=history,  # type: ignore[arg-type]
    )
    history.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
    return parse_usage(answer.usage.model_dump())


def test_the_anthropic_sdks_trace_shows_the_expiry_and_what_keep_warm_saves(
    clock: FrozenClock, exported: tuple[TracerProvider, Path]
) -> None:
    """OpenTelemetry's Anthropic instrumentation records the cache reads and writes: the
    audit prices them as the provider billed them and finds the gap that expired."""
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    provider, path = exported
    with (
        traced_sim(AnthropicInstrumentor(), provider, clock) as (url, key),
        anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as client,
    ):
        history: list[dict[str, Any]] = []
        usages = [_claude(client, history, "Review this diff")]
        clock.advance(60)
        usages.append(_claude(client, history, "And the tests?"))
        clock.advance(minutes=8)
        usages.append(_claude(client, history, "Back: anything else?"))
    report = audit_file(path)
    assert [c.usage.input_total for c in report.calls] == [u.input_total for u in usages]
    assert [(c.usage.read, c.usage.written) for c in report.calls] == [
        (u.read, u.written) for u in usages
    ]
    info = model_info("claude-sonnet-4-6")
    assert report.cost.usd == pytest.approx(sum(cost_usd(u, info) or 0 for u in usages))
    verdicts = [c.record.explanation.verdict for c in report.calls]
    assert verdicts == ["first", "hit", "expired"]
    (miss,) = report.lineages[0].misses
    assert miss.call == 3
    assert miss.cost_usd is not None
    assert miss.cost_usd > 0
    names = [w.name for w in report.what_if]
    assert names == ["Stoker's time policy"]
    assert any("gen_ai.conversation.id" in n for n in report.notes)


def test_the_openai_sdks_trace_is_priced_and_says_what_it_lacks(
    clock: FrozenClock, exported: tuple[TracerProvider, Path], tmp_path: Path
) -> None:
    """OpenTelemetry's official OpenAI instrumentation (openai-v2) records input and output
    tokens on Chat Completions but no cache figures: the audit prices what it has and says
    so, and the CLI prints it like `stoker report`, as JSON and as HTML too."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider, path = exported
    with (
        traced_sim(OpenAIInstrumentor(), provider, clock) as (url, key),
        openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0) as client,
    ):
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        totals = []
        for text in ("Is this diff safe?", "And the tests?"):
            messages.append({"role": "user", "content": text})
            answer = client.chat.completions.create(model="gpt-4.1", messages=messages)  # type: ignore[arg-type]
            assert answer.usage is not None
            totals.append((answer.usage.prompt_tokens, answer.usage.completion_tokens))
            messages.append({"role": "assistant", "content": answer.choices[0].message.content})
            clock.advance(30)
    report = audit_file(path)
    assert [(c.usage.input_total, c.usage.output) for c in report.calls] == totals
    info = model_info("gpt-4.1")
    expected = sum(uncached_cost_usd(Usage(uncached=i, output=o), info) or 0 for i, o in totals)
    assert report.cost.usd == pytest.approx(expected)
    assert any("carry no cache figures" in n for n in report.notes)
    html = tmp_path / "audit.html"
    out = CliRunner().invoke(app, ["audit", str(path), "--html", str(html)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "Stoker audit" in out.output
    assert "carry no cache figures" in out.output
    assert html.read_text(encoding="utf-8").count("id=savings") == 1
    as_json = CliRunner().invoke(app, ["audit", str(path), "--json"])
    assert json.loads(as_json.output)["cost"]["usd"] == pytest.approx(expected)


def test_a_file_that_is_not_otlp_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WireError, match="line 2: not JSON"):
        parse_spans('{"resourceSpans": []}\nnot json\n', path="t.jsonl")
    with pytest.raises(WireError, match="no `resourceSpans`"):
        parse_spans('{"spans": []}', path="t.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope", encoding="utf-8")
    out = CliRunner().invoke(app, ["audit", str(bad)])
    assert out.exit_code == 1
    assert "OTLP JSON" in out.output


def test_spans_from_one_pretty_printed_export_read_the_same() -> None:
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "x"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "ab",
                                "spanId": "cd",
                                "name": "chat claude-sonnet-4-6",
                                "kind": 3,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                                "attributes": [
                                    {
                                        "key": "gen_ai.usage.input_tokens",
                                        "value": {"intValue": "2000"},
                                    },
                                    {
                                        "key": "gen_ai.usage.cache_read.input_tokens",
                                        "value": {"intValue": "1500"},
                                    },
                                    {
                                        "key": "gen_ai.request.model",
                                        "value": {"stringValue": "claude-sonnet-4-6"},
                                    },
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    (span,) = parse_spans(json.dumps(doc, indent=2))
    assert (span.start, span.kind, span.number("gen_ai.usage.input_tokens")) == (1.7e9, 3, 2000)
    assert span.resource == {"service.name": "x"}


def test_stoker_report_of_the_same_session_and_audit_agree_on_the_terminal(
    tmp_path: Path, clock: FrozenClock, exported: tuple[TracerProvider, Path]
) -> None:
    provider, path = exported
    asyncio.run(_session(tmp_path / "s.db", clock, provider))
    provider.force_flush()
    env = {"STOKER_HOME": str(tmp_path), "COLUMNS": "200"}
    audit = CliRunner().invoke(app, ["audit", str(path)], env=env)
    report = CliRunner().invoke(app, ["report", "g", "--db", str(tmp_path / "s.db")], env=env)
    assert audit.exit_code == 0, audit.output
    assert report.exit_code == 0, report.output
    total = [line for line in report.output.splitlines() if "with no cache" in line][-1]
    assert total in audit.output
