"""OpenTelemetry: a span per turn and per provider call, saying what the records say.

The spans go to the SDK's in-memory exporter and the metrics to its in-memory reader; the
expected attributes are written out from the `CacheRecord`s the suite-wide observer saw,
field by field, so a span that drifted from its record fails here.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from stoker.agent.delegate import delegate_tool
from stoker.agent.keepwarm import KeepWarm
from stoker.agent.otel import OtelTelemetry
from stoker.agent.review import ReviewConfig
from stoker.agent.telemetry_setup import telemetry_from
from stoker.clock import FrozenClock
from stoker.config import Config
from stoker.providers.sim.model import tool_call
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from tests.helpers import make_registry, sim_agent
from tests.test_keep_warm import FailingKeepWarm


class Observed:
    """An `OtelTelemetry` whose spans and metrics stay in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.telemetry = OtelTelemetry(
            tracer_provider, MeterProvider(metric_readers=[self.metrics])
        )

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans.get_finished_spans())

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, point) of every data point of the metric `name`."""
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            (dict(point.attributes or {}), point)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def observed() -> Iterator[Observed]:
    o = Observed()
    yield o
    o.telemetry.shutdown()


class TeamModel:
    """Delegates when asked to, answers a sub-agent's task, says nothing to save in a
    review, and sums up tool results."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        if not last.text:
            return (TextBlock(text="done: " + " | ".join(r.content for r in last.tool_results)),)
        if "Background review" in last.text:
            return (TextBlock(text="nothing to save"),)
        if "sub-agent" in last.text:
            return (TextBlock(text="child answer"),)
        if "delegate" in last.text:
            return (tool_call(request, "delegate", {"goal": "count the files"}),)
        return (TextBlock(text="fork answer"),)


def _tree(spans: tuple[ReadableSpan, ...]) -> list[Any]:
    """The spans as nested (name, role, children) tuples, children in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(s)

    def build(parent: int | None) -> list[Any]:
        children = sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0)
        return [
            (
                s.name,
                (s.attributes or {})["stoker.session.role"],
                build(s.context.span_id if s.context is not None else None),
            )
            for s in children
        ]

    return build(None)


def _expected_call(record: CacheRecord, max_tokens: int = 4096) -> dict[str, Any]:
    """A call span's attributes, written out from its record."""
    why = record.explanation
    expected: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": record.provider,
        "gen_ai.system": record.provider,
        "gen_ai.request.model": record.model,
        "gen_ai.response.model": record.model,
        "gen_ai.request.max_tokens": max_tokens,
        "gen_ai.conversation.id": record.session_id,
        "gen_ai.usage.input_tokens": record.usage.uncached
        + record.usage.written_5m
        + record.usage.written_1h
        + record.usage.read,
        "gen_ai.usage.output_tokens": record.usage.output,
        "gen_ai.usage.cache_read.input_tokens": record.usage.read,
        "gen_ai.usage.cache_creation.input_tokens": record.usage.written_5m
        + record.usage.written_1h,
        "stoker.usage.uncached_tokens": record.usage.uncached,
        "stoker.usage.written_5m_tokens": record.usage.written_5m,
        "stoker.usage.written_1h_tokens": record.usage.written_1h,
        "stoker.session.id": record.session_id,
        "stoker.session.role": record.role,
        "stoker.call.purpose": record.purpose,
        "stoker.call.seq": record.seq,
        "stoker.call.retries": record.retries,
        "stoker.cache.verdict": why.verdict,
        "stoker.cache.cause": why.detail,
        "stoker.cache.explanation": str(why),
        "stoker.cache.breakpoints": len(record.breakpoints),
        "stoker.cost_usd": record.cost_usd,
        "stoker.cache.slot": why.slot,
        "stoker.cache.offset": why.offset,
        "stoker.cache.classification": why.classification,
        "stoker.cache.declared_break": record.declared_break,
    }
    return {k: v for k, v in expected.items() if v is not None}


async def test_a_turn_with_a_sub_agent_a_review_and_a_fork_is_one_span_tree(
    observed: Observed, recorded_calls: list[CacheRecord]
) -> None:
    agent, _ = sim_agent(
        model=TeamModel(),
        registry=make_registry(),
        tools=[delegate_tool()],
        review=ReviewConfig(memory_every=1),
        telemetry=observed.telemetry,
    )
    session = agent.session()
    result = await session.send("please delegate the count")
    await session.drain()
    fork = session.fork()
    await fork.send("and what else?")

    chat, turn = "chat claude-sonnet-4-6", "invoke_agent agent"
    assert _tree(observed.finished()) == [
        (
            turn,
            "main",
            [
                (chat, "main", []),
                (turn, "subagent", [(chat, "subagent", [])]),
                (chat, "main", []),
                (turn, "review", [(chat, "review", [])]),
                (turn, "fork", [(chat, "fork", [])]),
            ],
        )
    ]
    spans = observed.finished()
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1

    calls = {
        (s.attributes or {})["stoker.session.id"]: s for s in spans if s.kind == SpanKind.CLIENT
    }
    assert len(recorded_calls) == 5  # two main calls, one each for sub-agent, review, fork
    found = {
        (a["stoker.session.id"], a["stoker.call.seq"]): a
        for a in (dict(s.attributes or {}) for s in spans if s.kind == SpanKind.CLIENT)
    }
    assert found == {(r.session_id, r.seq): _expected_call(r) for r in recorded_calls}
    assert set(calls) == {r.session_id for r in recorded_calls}
    # the children read the parent's cache, and the spans say so
    assert all(
        found[(r.session_id, 0)]["gen_ai.usage.cache_read.input_tokens"] > 0
        for r in recorded_calls
        if r.role != "main"
    )

    main_turn = next(
        s
        for s in spans
        if s.kind == SpanKind.INTERNAL and (s.attributes or {})["stoker.session.role"] == "main"
    )
    attributes = dict(main_turn.attributes or {})
    main_records = [r for r in recorded_calls if r.session_id == session.id]
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "agent"
    assert attributes["gen_ai.conversation.id"] == session.id
    assert attributes["stoker.turn.exit"] == "answered"
    assert attributes["stoker.turn.iterations"] == result.iterations == 2
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == sum(
        r.usage.read for r in main_records
    )
    assert attributes["stoker.cost_usd"] == pytest.approx(
        sum(r.cost_usd or 0 for r in main_records)
    )
    sub_turn = next(
        s
        for s in spans
        if s.kind == SpanKind.INTERNAL and (s.attributes or {})["stoker.session.role"] == "subagent"
    )
    assert (sub_turn.attributes or {})["stoker.session.parent_id"] == session.id


async def test_metrics_count_tokens_and_cost_per_call(
    observed: Observed, recorded_calls: list[CacheRecord]
) -> None:
    agent, _ = sim_agent(telemetry=observed.telemetry)
    session = agent.session()
    await session.send("hello")
    await session.send("hello again")

    tokens = observed.metric_points("gen_ai.client.token.usage")
    by_type = {a["gen_ai.token.type"]: p for a, p in tokens}
    assert by_type["input"].count == len(recorded_calls) == 2
    assert by_type["input"].sum == sum(r.usage.input_total for r in recorded_calls)
    assert by_type["output"].sum == sum(r.usage.output for r in recorded_calls)
    assert {a["gen_ai.operation.name"] for a, _ in tokens} == {"chat"}
    assert {a["gen_ai.response.model"] for a, _ in tokens} == {"claude-sonnet-4-6"}

    buckets = {
        a["stoker.cache.bucket"]: p.value for a, p in observed.metric_points("stoker.cache.tokens")
    }
    assert buckets.get("read", 0) == sum(r.usage.read for r in recorded_calls) > 0
    assert buckets.get("written_5m", 0) + buckets.get("written_1h", 0) == sum(
        r.usage.written for r in recorded_calls
    )
    (cost,) = observed.metric_points("stoker.cost")
    assert cost[1].value == pytest.approx(sum(r.cost_usd or 0 for r in recorded_calls))
    verdicts = {
        a["stoker.cache.verdict"]: p.value for a, p in observed.metric_points("stoker.calls")
    }
    assert verdicts == {"first": 1, "hit": 1}
    (duration,) = observed.metric_points("gen_ai.client.operation.duration")
    assert duration[1].count == 2


class BrokenModel:
    def respond(self, request: Request) -> tuple[Block, ...]:
        raise RuntimeError("the model broke")


async def test_a_failed_call_ends_its_spans_as_errors(observed: Observed) -> None:
    agent, _ = sim_agent(model=BrokenModel(), telemetry=observed.telemetry)
    with pytest.raises(Exception, match="the model broke"):
        await agent.session().send("hello")

    spans = {s.kind: s for s in observed.finished()}
    for kind in (SpanKind.CLIENT, SpanKind.INTERNAL):
        assert spans[kind].status.status_code == StatusCode.ERROR
        assert (spans[kind].attributes or {})["error.type"]
    assert "gen_ai.usage.input_tokens" not in (spans[SpanKind.CLIENT].attributes or {})
    errors = observed.metric_points("gen_ai.client.operation.duration")
    assert [a["error.type"] for a, _ in errors] == [spans[SpanKind.CLIENT].attributes["error.type"]]  # type: ignore[index]
    assert observed.metric_points("gen_ai.client.token.usage") == []


class Receiver:
    """A tiny OTLP/HTTP receiver on loopback: decodes each export request with the
    protobuf messages of opentelemetry-proto and keeps it, with its headers."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path == "/v1/traces":
                    receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) of every span received."""
        return [
            (_attributes(rs.resource.attributes), span)
            for request in self.traces
            for rs in request.resource_spans
            for scope in rs.scope_spans
            for span in scope.spans
        ]

    def metric(self, name: str) -> list[Any]:
        return [
            m
            for request in self.metrics
            for rm in request.resource_metrics
            for scope in rm.scope_metrics
            for m in scope.metrics
            if m.name == name
        ]


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in pairs}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()
    r.thread.join(5)


async def test_spans_and_metrics_reach_an_otlp_receiver_over_http(
    receiver: Receiver, recorded_calls: list[CacheRecord]
) -> None:
    config = Config.from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t0ken",
            "OTEL_SERVICE_NAME": "stoker-under-test",
        }
    )
    telemetry = telemetry_from(config.telemetry)
    agent, _ = sim_agent(telemetry=telemetry)
    session = agent.session()
    await session.send("hello")
    await session.send("hello again")
    telemetry.shutdown()  # flushes the batched spans and the last metrics

    received = receiver.spans()
    assert {resource["service.name"] for resource, _ in received} == {"stoker-under-test"}
    calls = [span for _, span in received if span.name.startswith("chat ")]
    turns = [span for _, span in received if span.name.startswith("invoke_agent ")]
    assert len(turns) == 2
    assert sorted(span.parent_span_id for span in calls) == sorted(t.span_id for t in turns)
    found = {
        (a["stoker.session.id"], a["stoker.call.seq"]): a
        for a in (_attributes(span.attributes) for span in calls)
    }
    assert found == {(r.session_id, r.seq): _expected_call(r) for r in recorded_calls}
    assert {h.get("authorization") for h in receiver.headers} == {"Bearer t0ken"}
    assert {h["content-type"] for h in receiver.headers} == {"application/x-protobuf"}

    (usage,) = receiver.metric("gen_ai.client.token.usage")
    by_type = {
        _attributes(p.attributes)["gen_ai.token.type"]: p for p in usage.histogram.data_points
    }
    assert by_type["input"].sum == sum(r.usage.input_total for r in recorded_calls)
    assert by_type["input"].count == 2
    (cache,) = receiver.metric("stoker.cache.tokens")
    read = [
        p
        for p in cache.sum.data_points
        if _attributes(p.attributes)["stoker.cache.bucket"] == "read"
    ]
    assert [p.as_int for p in read] == [sum(r.usage.read for r in recorded_calls)]
    (cost,) = receiver.metric("stoker.cost")
    assert cost.unit == "USD"
    assert cost.sum.data_points[0].as_double == pytest.approx(
        sum(r.cost_usd or 0 for r in recorded_calls)
    )


async def test_keep_warm_requests_are_call_spans_of_their_own(observed: Observed) -> None:
    clock = FrozenClock()
    agent, _ = sim_agent(registry=make_registry(), clock=clock, telemetry=observed.telemetry)
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("read_file 'plan.md'")
    (seal,) = await scheduler.idle(6 * 60)
    assert (seal.purpose, seal.explanation.verdict) == ("seal", "kept_warm")

    (span,) = [
        s for s in observed.finished() if (s.attributes or {}).get("stoker.call.purpose") == "seal"
    ]
    assert span.parent is None  # not part of any turn
    assert dict(span.attributes or {}) == _expected_call(seal, max_tokens=0)
    calls = {a["stoker.cache.verdict"]: p.value for a, p in observed.metric_points("stoker.calls")}
    assert calls["kept_warm"] == 1


async def test_a_failed_keep_warm_is_an_error_span_and_nothing_else(observed: Observed) -> None:
    clock = FrozenClock()
    agent, provider = sim_agent(registry=make_registry(), clock=clock, telemetry=observed.telemetry)
    agent = replace(agent, provider=FailingKeepWarm(provider))
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("read_file 'plan.md'")
    assert await scheduler.idle(6 * 60) == []

    (span,) = [
        s for s in observed.finished() if (s.attributes or {}).get("stoker.call.purpose") == "seal"
    ]
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "ProviderError"
    assert "stoker.cache.verdict" not in (span.attributes or {})
    assert [e.name for e in span.events] == ["exception"]
