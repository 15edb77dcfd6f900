"""Which telemetry a program's settings ask for: nothing, or OpenTelemetry.

Its own module so the seam (`stoker.agent.telemetry`) and its OpenTelemetry
implementation (`stoker.agent.otel`) never import each other: this is the one place that
knows both, and it imports OpenTelemetry only when the settings ask for it.
"""

from __future__ import annotations

from stoker.agent.telemetry import NO_TELEMETRY, Telemetry
from stoker.config import TelemetrySettings
from stoker.errors import ConfigError


def telemetry_from(settings: TelemetrySettings | None) -> Telemetry:
    """The telemetry `settings` ask for (`Config.telemetry`): nothing when None, else
    OpenTelemetry exporting to their endpoints (a clear error when the `otel` extra is
    not installed)."""
    if settings is None:
        return NO_TELEMETRY
    try:
        from stoker.agent.otel import exporting
    except ImportError as exc:
        raise ConfigError(
            f"OpenTelemetry export is configured (OTEL_* settings) but {exc.name or 'it'} is "
            "not installed: pip install 'stoker[otel]', or unset the OTEL_* exporter variables"
        ) from exc
    return exporting(settings)
