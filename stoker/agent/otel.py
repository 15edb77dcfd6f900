"""OpenTelemetry spans and metrics for turns and provider calls (the `otel` extra).

It follows the GenAI semantic conventions: a turn is an `invoke_agent` span, a provider
call a `chat` span (kind CLIENT) carrying the model and `gen_ai.usage.*`, with cache reads
and writes in `gen_ai.usage.cache_read.input_tokens` / `cache_creation.input_tokens`.
What only Stoker knows goes in `stoker.*` attributes: the cache verdict, its cause, the
first slot that moved, the disjoint usage buckets and the cost.

Forks, reviews and sub-agents are child spans. A sub-agent runs inside its parent's turn
and a review starts there, so the span current at their start is the parent's turn. A
fork made between turns has no current span; its turns then hang under the last turn of
the session it was forked from (remembered here by session id, a bounded map).

Only this module imports OpenTelemetry, and only `telemetry_from` imports this module.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.propagate import extract
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from stoker.agent.loop import TurnResult
from stoker.agent.telemetry import CallFacts, CallSpan, TurnFacts, TurnSpan
from stoker.config import TelemetrySettings
from stoker.errors import ConfigError
from stoker.wire.record import CacheRecord
from stoker.wire.usage import Usage

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

Attributes = dict[str, AttributeValue]
T = TypeVar("T")

# Bucket boundaries the GenAI conventions advise for these two histograms.
TOKEN_BUCKETS = [4**i for i in range(14)]
DURATION_BUCKETS = [0.01 * 2**i for i in range(14)]
REMEMBERED_TURNS = 10_000  # sessions whose last turn a later fork may hang under


def usage_attributes(usage: Usage) -> Attributes:
    """The GenAI usage attributes, plus Stoker's disjoint buckets. The conventions count
    cached tokens inside `input_tokens`, so it is the whole input."""
    return {
        "gen_ai.usage.input_tokens": usage.input_total,
        "gen_ai.usage.output_tokens": usage.output,
        "gen_ai.usage.cache_read.input_tokens": usage.read,
        "gen_ai.usage.cache_creation.input_tokens": usage.written,
        "stoker.usage.uncached_tokens": usage.uncached,
        "stoker.usage.written_5m_tokens": usage.written_5m,
        "stoker.usage.written_1h_tokens": usage.written_1h,
    }


def record_attributes(record: CacheRecord) -> Attributes:
    """What a call's span says once the call is measured: its record, attribute by attribute."""
    why = record.explanation
    found: Attributes = {
        "gen_ai.response.model": record.model,
        **usage_attributes(record.usage),
        "stoker.call.seq": record.seq,
        "stoker.call.retries": record.retries,
        "stoker.cache.verdict": why.verdict,
        "stoker.cache.cause": why.detail,
        "stoker.cache.explanation": str(why),
        "stoker.cache.breakpoints": len(record.breakpoints),
    }
    optional: dict[str, AttributeValue | None] = {
        "stoker.cache.slot": why.slot,
        "stoker.cache.offset": why.offset,
        "stoker.cache.classification": why.classification,
        "stoker.cache.declared_break": record.declared_break,
        "stoker.cost_usd": record.cost_usd,
        # explicit cache objects (Gemini's): storage a lifecycle call bought or gave back,
        # and what a call read from a cache it named
        "stoker.cache.storage_token_hours": record.storage_token_hours or None,
        "stoker.cache.object_read_tokens": record.cache_read or None,
    }
    found.update({k: v for k, v in optional.items() if v is not None})
    return found


# Stoker's provider names as the GenAI semantic conventions spell them, where they differ.
SEMCONV_PROVIDERS = {"bedrock": "aws.bedrock"}


def provider_name(provider: str) -> str:
    """`gen_ai.provider.name` for one of Stoker's providers."""
    return SEMCONV_PROVIDERS.get(provider, provider)


class _Turn:
    def __init__(self, span: Span) -> None:
        self._span = span

    def ended(self, result: TurnResult[Any]) -> None:
        attributes: Attributes = {
            **usage_attributes(result.usage),
            "stoker.turn.exit": result.exit,
            "stoker.turn.iterations": result.iterations,
            "stoker.turn.calls": len(result.records),
        }
        if result.cost_usd is not None:
            attributes["stoker.cost_usd"] = result.cost_usd
        self._span.set_attributes(attributes)


class _Call:
    def __init__(self, span: Span) -> None:
        self.span = span
        self.record: CacheRecord | None = None
        self.error: str | None = None

    def recorded(self, record: CacheRecord) -> None:
        self.record = record
        self.span.set_attributes(record_attributes(record))

    def failed(self, error: BaseException) -> None:
        self.error = type(error).__qualname__
        self.span.record_exception(error)
        self.span.set_attribute("error.type", self.error)
        self.span.set_status(Status(StatusCode.ERROR, self.error))


class OtelTelemetry:
    """`Telemetry` over OpenTelemetry. Without providers it uses the global ones, so a
    program that set up OpenTelemetry itself passes `OtelTelemetry()` to its agents."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self._providers = (tracer_provider, meter_provider)
        self._tracer = trace.get_tracer("stoker", tracer_provider=tracer_provider)
        meter = metrics.get_meter("stoker", meter_provider=meter_provider)
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Input and output tokens per provider call.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of provider calls.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self._cache_tokens = meter.create_counter(
            "stoker.cache.tokens",
            unit="{token}",
            description="Input tokens by cache bucket: uncached, written_5m, written_1h, read.",
        )
        self._cost = meter.create_counter(
            "stoker.cost", unit="USD", description="What provider calls cost (known prices)."
        )
        self._calls = meter.create_counter(
            "stoker.calls", unit="{call}", description="Provider calls by cache verdict."
        )
        self._last_turn: OrderedDict[str, SpanContext] = OrderedDict()

    @contextmanager
    def turn(self, facts: TurnFacts) -> Iterator[TurnSpan]:
        parent = None
        if not trace.get_current_span().get_span_context().is_valid and facts.parent_id:
            remembered = self._last_turn.get(facts.parent_id)
            if remembered is not None:
                parent = trace.set_span_in_context(NonRecordingSpan(remembered))
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": facts.agent,
            "gen_ai.conversation.id": facts.session_id,
            "gen_ai.provider.name": provider_name(facts.provider),
            # the older name, for backends that still read it
            "gen_ai.system": provider_name(facts.provider),
            "gen_ai.request.model": facts.model,
            "stoker.session.id": facts.session_id,
            "stoker.session.role": facts.role,
        }
        if facts.parent_id:
            attributes["stoker.session.parent_id"] = facts.parent_id
        with self._tracer.start_as_current_span(
            f"invoke_agent {facts.agent}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        ) as span:
            self._remember(facts.session_id, span.get_span_context())
            try:
                yield _Turn(span)
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                raise

    @contextmanager
    def call(self, facts: CallFacts) -> Iterator[CallSpan]:
        common: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(facts.provider),
            "gen_ai.request.model": facts.model,
            "stoker.session.role": facts.role,
        }
        attributes: Attributes = {
            **common,
            "gen_ai.system": provider_name(facts.provider),
            "gen_ai.request.max_tokens": facts.max_tokens,
            "gen_ai.conversation.id": facts.session_id,
            "stoker.session.id": facts.session_id,
            "stoker.call.purpose": facts.purpose,
        }
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            f"chat {facts.model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            call = _Call(span)
            try:
                yield call
            except BaseException as exc:
                call.error = type(exc).__qualname__
                span.set_attribute("error.type", call.error)
                raise
            finally:
                self._measure(call, common, facts, time.perf_counter() - started)

    def _measure(self, call: _Call, common: Attributes, facts: CallFacts, seconds: float) -> None:
        """The call's metrics; a failed call counts only in the duration (with its error)."""
        if call.error is not None:
            self._duration.record(seconds, {**common, "error.type": call.error})
            return
        record = call.record
        if record is None:
            return
        common = {**common, "gen_ai.response.model": record.model}
        self._duration.record(seconds, common)
        usage = record.usage
        self._tokens.record(usage.input_total, {**common, "gen_ai.token.type": "input"})
        self._tokens.record(usage.output, {**common, "gen_ai.token.type": "output"})
        buckets = {
            "uncached": usage.uncached,
            "written_5m": usage.written_5m,
            "written_1h": usage.written_1h,
            "read": usage.read,
        }
        for bucket, tokens in buckets.items():
            if tokens:
                self._cache_tokens.add(tokens, {**common, "stoker.cache.bucket": bucket})
        if record.cost_usd is not None:
            self._cost.add(record.cost_usd, common)
        verdict = record.explanation.verdict
        self._calls.add(
            1, {**common, "stoker.cache.verdict": verdict, "stoker.call.purpose": facts.purpose}
        )

    @contextmanager
    def attached(self, headers: Mapping[str, str]) -> Iterator[None]:
        token = otel_context.attach(extract(dict(headers)))
        try:
            yield
        finally:
            otel_context.detach(token)

    def _remember(self, session_id: str, span: SpanContext) -> None:
        self._last_turn[session_id] = span
        self._last_turn.move_to_end(session_id)
        while len(self._last_turn) > REMEMBERED_TURNS:
            self._last_turn.popitem(last=False)

    def shutdown(self) -> None:
        for provider in self._providers:
            stop = getattr(provider, "shutdown", None)
            if stop is not None:
                stop()


EXPORTERS = ("otlp", "console", "none")


def _names(value: str, signal: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise ConfigError(
            f"OTEL_{signal}_EXPORTER={value!r}: Stoker exports with {', '.join(EXPORTERS)}; "
            f"{', '.join(unknown)} is not one of them"
        )
    return [n for n in names if n != "none"]


def _exporters(value: str, signal: str, otlp: Callable[[], T], console: Callable[[], T]) -> list[T]:
    """One exporter per name `value` lists (OTEL_<signal>_EXPORTER), traces' or metrics'."""
    return [otlp() if name == "otlp" else console() for name in _names(value, signal)]


def exporting(settings: TelemetrySettings) -> OtelTelemetry:
    """Telemetry with its own SDK providers (not the global ones: a host program's setup
    stays its own), exporting as `settings` say; they flush at process exit too."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
    )

    if settings.protocol != "http/protobuf":
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={settings.protocol!r}: Stoker exports OTLP over "
            "HTTP only; set it to http/protobuf (collectors take it on port 4318)"
        )
    headers = dict(settings.headers) or None
    resource = Resource.create({"service.name": settings.service_name})
    tracer_provider = TracerProvider(resource=resource)
    spans = _exporters(
        settings.traces,
        "TRACES",
        lambda: OTLPSpanExporter(endpoint=settings.traces_endpoint, headers=headers),
        ConsoleSpanExporter,
    )
    for exporter in spans:
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    metrics = _exporters(
        settings.metrics,
        "METRICS",
        lambda: OTLPMetricExporter(endpoint=settings.metrics_endpoint, headers=headers),
        ConsoleMetricExporter,
    )
    readers = [PeriodicExportingMetricReader(exporter) for exporter in metrics]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return OtelTelemetry(tracer_provider, meter_provider)
