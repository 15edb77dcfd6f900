"""The gateway joins its callers' traces: a request's W3C `traceparent` parents the turn
it runs, streamed or not; a request without one starts a trace of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from stoker.agent.otel import OtelTelemetry
from stoker.agent.telemetry import NO_TELEMETRY
from stoker.config import Config, TelemetrySettings
from stoker.gateway.config import load_config
from stoker.gateway.server import build_gateway
from stoker.run import default_agent
from stoker.store.base import SqlEventStore
from tests.test_gateway_support import auth, client, make_rig
from tests.test_telemetry import Observed

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CALLER_SPAN = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{CALLER_SPAN:016x}-01"


def _turns(spans: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return [s for s in spans if s.kind == SpanKind.INTERNAL]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_message_with_a_traceparent_runs_its_turn_in_the_callers_trace(
    store: SqlEventStore, stream: bool
) -> None:
    observed = Observed()
    rig = make_rig(store, telemetry=observed.telemetry)
    async with client(rig) as c:
        r = await c.post("/v1/sessions", json={}, headers=auth("alice"))
        sid = r.json()["id"]
        r = await c.post(
            f"/v1/sessions/{sid}/messages?stream={'true' if stream else 'false'}",
            json={"text": "read_file 'a.md'"},
            headers={**auth("alice"), "traceparent": TRACEPARENT},
        )
        assert r.status_code == 200
        r = await c.post(
            f"/v1/sessions/{sid}/messages", json={"text": "thanks"}, headers=auth("alice")
        )
        assert r.status_code == 200
    observed.telemetry.shutdown()

    spans = observed.finished()
    joined, own = sorted(_turns(spans), key=lambda s: s.start_time or 0)
    assert joined.context is not None
    assert joined.parent is not None
    assert (joined.context.trace_id, joined.parent.span_id) == (TRACE_ID, CALLER_SPAN)
    assert joined.parent.is_remote
    assert (joined.attributes or {})["gen_ai.conversation.id"] == sid
    calls = [s for s in spans if s.kind == SpanKind.CLIENT and s.parent == joined.context]
    assert len(calls) == 2  # the tool call, then the answer
    assert {s.context.trace_id for s in calls if s.context is not None} == {TRACE_ID}
    assert own.parent is None
    assert own.context is not None
    assert own.context.trace_id != TRACE_ID


async def test_stoker_serve_and_run_take_the_otel_variables(
    store: SqlEventStore, tmp_path: Path
) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "STOKER_HOME": str(tmp_path)}
    settings = load_config(None, env=env)
    assert settings.telemetry == TelemetrySettings.to("http://127.0.0.1:9")
    gateway = build_gateway(settings, store=store)
    assert isinstance(gateway.telemetry, OtelTelemetry)
    assert isinstance(gateway.pool.agent_for(gateway.defaults).telemetry, OtelTelemetry)
    agent = default_agent(config=Config.from_env(env), workdir=tmp_path)
    assert isinstance(agent.telemetry, OtelTelemetry)
    quiet = load_config(None, env={"STOKER_HOME": str(tmp_path)})
    assert build_gateway(quiet, store=store).telemetry is NO_TELEMETRY
    for telemetry in (gateway.telemetry, agent.telemetry):
        telemetry.shutdown()
