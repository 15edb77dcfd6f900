"""OpenTelemetry is off unless configured, by the standard OTEL_* variables or explicitly,
and Stoker runs without the `otel` extra installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.agent.telemetry import NO_TELEMETRY
from stoker.agent.telemetry_setup import telemetry_from
from stoker.config import Config, TelemetrySettings
from stoker.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_SERVICE_NAME": "mine", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
    ],
)
def test_telemetry_is_off_unless_an_exporter_or_endpoint_is_named(env: dict[str, str]) -> None:
    assert TelemetrySettings.from_env(env) is None
    assert Config.from_env(env).telemetry is None
    assert telemetry_from(None) is NO_TELEMETRY


def test_the_standard_variables_configure_the_export() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://metrics:9000/custom",
        "OTEL_METRICS_EXPORTER": "console",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cr%3Dt,tenant = blue",
        "OTEL_SERVICE_NAME": "agents",
    }
    assert Config.from_env(env).telemetry == TelemetrySettings(
        traces="otlp",
        metrics="console",
        traces_endpoint="http://collector:4318/v1/traces",
        metrics_endpoint="http://metrics:9000/custom",
        headers={"x-api-key": "s3cr=t", "tenant": "blue"},
        service_name="agents",
    )
    assert TelemetrySettings.from_env({"OTEL_TRACES_EXPORTER": "otlp"}) == TelemetrySettings()
    assert TelemetrySettings.to("http://127.0.0.1:4318") == TelemetrySettings(
        traces_endpoint="http://127.0.0.1:4318/v1/traces",
        metrics_endpoint="http://127.0.0.1:4318/v1/metrics",
    )


def test_an_explicit_setting_wins_and_headers_never_show() -> None:
    mine = TelemetrySettings.to("http://127.0.0.1:1", headers={"authorization": "Bearer hush"})
    config = Config.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"}, telemetry=mine)
    assert config.telemetry is mine
    assert "hush" not in repr(config)
    assert "http://127.0.0.1:1/v1/traces" in repr(config)


_token = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20
)


@given(st.dictionaries(_token.filter(lambda k: k.strip() == k), _token, max_size=5))
def test_any_header_survives_the_variable_encoding(headers: dict[str, str]) -> None:
    encoded = ",".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in headers.items())
    settings = TelemetrySettings.from_env(
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": encoded}
    )
    assert settings is not None
    assert settings.headers == headers  # an encoded space is part of the value


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (TelemetrySettings(protocol="grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL='grpc'"),
        (TelemetrySettings(traces="zipkin"), "zipkin is not one of them"),
        (TelemetrySettings(metrics="otlp,prometheus"), "prometheus is not one of them"),
    ],
)
def test_what_stoker_cannot_export_is_a_clear_error(settings: TelemetrySettings, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
        telemetry_from(settings)


WITHOUT_OTEL = """
import asyncio, sys

class NoOtel:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoOtel())

import stoker
from stoker import Agent, Config, ConfigError, TelemetrySettings, telemetry_from

async def main():
    config = Config.from_env({})
    async with Agent("sim:claude-sonnet-4-6", telemetry=telemetry_from(config.telemetry)) as a:
        result = await a.session().send("hello")
    assert result.exit == "answered", result
    try:
        telemetry_from(TelemetrySettings())
    except ConfigError as exc:
        print("refused:", exc)

asyncio.run(main())
assert not [m for m in sys.modules if m.startswith("opentelemetry")]
print("ran without opentelemetry")
"""


def test_stoker_runs_without_the_otel_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WITHOUT_OTEL)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ran without opentelemetry" in done.stdout
    assert "pip install 'stoker[otel]'" in done.stdout
