"""Stoker's settings, resolved once at the edge into one frozen value that is passed down.

Library code never reads the environment (`tests/test_config.py` keeps it so): the CLI
and `stoker serve` call `Config.from_env(os.environ, ...)` once, with their flags on top,
and hand the value to what they build. A program that embeds Stoker does the same, or
builds a `Config` from its own settings, or gives none: a provider whose key the settings
lack is left to its official SDK, which finds its own (`anthropic.AsyncAnthropic()` reads
ANTHROPIC_API_KEY; `stoker.providers.select`). This module is the only place that knows these
variables' names (the gateway's own STOKER_GATEWAY_* live with its file format, in
`stoker.gateway.config`) and the only place that holds each default:

    STOKER_HOME            where Stoker keeps its files (default: the user data dir)
    STOKER_DATABASE_URL    the session store: a PostgreSQL DSN, ...
    STOKER_DB              ... else a SQLite file (default: $STOKER_HOME/stoker.db)
    ANTHROPIC_API_KEY      the providers' keys and base URLs (the keys are never shown by
    ANTHROPIC_BASE_URL     repr, in logs or in error messages, and never stored)
    OPENAI_API_KEY
    OPENAI_BASE_URL
    AWS_ACCESS_KEY_ID      Bedrock: the credentials the AWS SDK signs with (or AWS_PROFILE),
    AWS_SECRET_ACCESS_KEY  the region (AWS_REGION, else AWS_DEFAULT_REGION), and an endpoint
    AWS_SESSION_TOKEN      (AWS_ENDPOINT_URL_BEDROCK_RUNTIME, e.g. `stoker sim serve`'s URL)
    OPENROUTER_API_KEY     OpenRouter and DeepSeek: keys and base URLs
    OPENROUTER_BASE_URL
    DEEPSEEK_API_KEY
    DEEPSEEK_BASE_URL
    STOKER_LOCAL_CACHE     which server an `openai-compatible:` spec names: vllm or llamacpp
    GOOGLE_API_KEY         Gemini (`google:`): the key (GEMINI_API_KEY too, the first set
    GEMINI_API_KEY         winning, as google-genai reads them) and a base URL, e.g.
    GOOGLE_GEMINI_BASE_URL `stoker sim serve`'s
    OTEL_*                 OpenTelemetry export (see `TelemetrySettings.from_env`): off
                           unless an OTLP endpoint or exporter is named
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote

import platformdirs

DEFAULT_MODEL = "claude-sonnet-4-6"
"""The model a session uses when nothing names one (the simulator serves it too)."""

DEFAULT_PROVIDER = "sim:"
"""The provider spec used when nothing names one: the embedded simulator (no key, no
network). See `stoker.providers.select` for the spec syntax."""

DATABASE_FILE = "stoker.db"
"""The SQLite file under the Stoker home when no database is named."""

PRICES_FILE = "prices.toml"
"""The user's price overrides under the Stoker home (`stoker.cache.prices`)."""

SIM_CACHE_FILE = "sim-cache.db"
"""The embedded simulator's cache entries under the Stoker home, kept between processes
(`stoker.providers.sim.cache_file`)."""

ENVIRONMENT: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "home": ("STOKER_HOME",),
        "database": ("STOKER_DATABASE_URL", "STOKER_DB"),
        "anthropic_api_key": ("ANTHROPIC_API_KEY",),
        "anthropic_base_url": ("ANTHROPIC_BASE_URL",),
        "openai_api_key": ("OPENAI_API_KEY",),
        "openai_base_url": ("OPENAI_BASE_URL",),
        "aws_access_key_id": ("AWS_ACCESS_KEY_ID",),
        "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
        "aws_session_token": ("AWS_SESSION_TOKEN",),
        "aws_region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
        "aws_profile": ("AWS_PROFILE",),
        "bedrock_base_url": ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME",),
        "openrouter_api_key": ("OPENROUTER_API_KEY",),
        "openrouter_base_url": ("OPENROUTER_BASE_URL",),
        "deepseek_api_key": ("DEEPSEEK_API_KEY",),
        "deepseek_base_url": ("DEEPSEEK_BASE_URL",),
        "local_cache": ("STOKER_LOCAL_CACHE",),
        "google_api_key": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        "google_base_url": ("GOOGLE_GEMINI_BASE_URL",),
    }
)
"""Which variables set which `Config` field, the first one set winning."""


def env_var(name: str) -> str:
    """The variable a user sets for the `Config` field `name`, for messages that say what
    to do ("set ANTHROPIC_API_KEY")."""
    return ENVIRONMENT[name][0]


def redact_dsn(location: str) -> str:
    """The database location without its password, for reprs and error messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", location)


def repr_without_secrets(settings: Any) -> str:
    """A settings dataclass's repr that can be logged: fields marked `repr=False` (keys)
    are left out and a `database` location loses its password."""
    shown = []
    for f in fields(settings):
        if f.repr:
            value = getattr(settings, f.name)
            if f.name == "database" and isinstance(value, str):
                value = redact_dsn(value)
            shown.append(f"{f.name}={value!r}")
    return f"{type(settings).__name__}({', '.join(shown)})"


OTLP_HTTP_ENDPOINT = "http://localhost:4318"
"""Where an OTLP/HTTP collector listens unless OTEL_EXPORTER_OTLP_ENDPOINT says otherwise."""


def _otlp_headers(value: str) -> dict[str, str]:
    """`k1=v1,k2=v2` with URL-encoded values, as OTEL_EXPORTER_OTLP_HEADERS writes them."""
    found = {}
    for item in value.split(","):
        name, sep, text = item.partition("=")
        if sep and name.strip():
            found[unquote(name.strip())] = unquote(text.strip())
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySettings:
    """Where Stoker's OpenTelemetry spans and metrics go; a `Config` without these sends
    none (nothing from OpenTelemetry is even imported).

    `traces` and `metrics` name each signal's exporter: "otlp" (OTLP over HTTP, protobuf,
    to the endpoint), "console", or "none"; a comma list names several. `headers` go
    with every export (collectors take API keys there), so the repr leaves them out.
    """

    traces: str = "otlp"
    metrics: str = "otlp"
    traces_endpoint: str = OTLP_HTTP_ENDPOINT + "/v1/traces"
    metrics_endpoint: str = OTLP_HTTP_ENDPOINT + "/v1/metrics"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    protocol: str = "http/protobuf"
    service_name: str = "stoker"

    @classmethod
    def to(cls, endpoint: str, **settings: Any) -> TelemetrySettings:
        """Export both signals over OTLP/HTTP to the collector at `endpoint` (its base URL,
        e.g. http://127.0.0.1:4318)."""
        base = endpoint.rstrip("/")
        return cls(
            traces_endpoint=base + "/v1/traces", metrics_endpoint=base + "/v1/metrics", **settings
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TelemetrySettings | None:
        """The standard OTEL_* exporter variables, or None (off) when none names an
        exporter or endpoint, both exporters are "none", or OTEL_SDK_DISABLED=true.

        Read: OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT
        (the base URL; /v1/traces and /v1/metrics are added),
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and ..._METRICS_ENDPOINT (full URLs, used as
        given), OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME.
        """

        def get(name: str) -> str:
            return env.get(name, "").strip()

        if get("OTEL_SDK_DISABLED").lower() == "true":
            return None
        named = [
            get(n)
            for n in (
                "OTEL_TRACES_EXPORTER",
                "OTEL_METRICS_EXPORTER",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            )
        ]
        if not any(named):
            return None
        traces = get("OTEL_TRACES_EXPORTER").lower() or "otlp"
        metrics = get("OTEL_METRICS_EXPORTER").lower() or "otlp"
        if traces == metrics == "none":
            return None
        base = (get("OTEL_EXPORTER_OTLP_ENDPOINT") or OTLP_HTTP_ENDPOINT).rstrip("/")
        return cls(
            traces=traces,
            metrics=metrics,
            traces_endpoint=get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or base + "/v1/traces",
            metrics_endpoint=get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or base + "/v1/metrics",
            headers=_otlp_headers(get("OTEL_EXPORTER_OTLP_HEADERS")),
            protocol=get("OTEL_EXPORTER_OTLP_PROTOCOL").lower() or "http/protobuf",
            service_name=get("OTEL_SERVICE_NAME") or "stoker",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayLimits:
    """How much one gateway process accepts and keeps alive.

    The one home of these defaults: the gateway's TOML schema, `Gateway`, `AgentPool`,
    `AgentCache` and `create_app` all take theirs from `DEFAULT_LIMITS`, so a default
    cannot differ between the file and the library.
    """

    max_body_bytes: int = 1_048_576  # larger request bodies get 413 before they are parsed
    max_message_chars: int = 100_000  # longer user messages are refused (400)
    cache_size: int = 128  # live agents kept in memory; more are rebuilt from the store
    idle_ttl: float = 3600.0  # seconds an unused agent is kept


DEFAULT_LIMITS = GatewayLimits()


# The Config fields of Bedrock, OpenRouter, DeepSeek and the local servers.
_MORE_PROVIDERS = (
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region",
    "aws_profile",
    "bedrock_base_url",
    "openrouter_api_key",
    "openrouter_base_url",
    "deepseek_api_key",
    "deepseek_base_url",
    "local_cache",
    "google_api_key",
    "google_base_url",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """What the library needs from outside the program, resolved once.

    `home` holds Stoker's files: the default SQLite database, `memory/`, `skills/`, the
    price overrides (`prices.toml`) and the simulator's cache (`sim-cache.db`).
    `database` is a SQLite path, `sqlite:///path` or a `postgresql://` DSN (its password
    is masked in the repr). `provider` is a spec (`stoker.providers.select`), `model` the
    model used when the spec names none. The keys are not part of the repr, so a config
    can be logged; they reach only the provider that needs them.
    """

    home: Path
    database: str
    provider: str = DEFAULT_PROVIDER
    model: str = DEFAULT_MODEL
    anthropic_api_key: str | None = field(default=None, repr=False)
    anthropic_base_url: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    telemetry: TelemetrySettings | None = None  # OpenTelemetry export; None: off
    # Bedrock (signed by the AWS SDK with these), OpenRouter, DeepSeek; `local_cache` is
    # the server an `openai-compatible:` spec runs on when it does not say ("vllm",
    # "llamacpp"). Keys and secrets are never in the repr.
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    aws_region: str | None = None
    aws_profile: str | None = None
    bedrock_base_url: str | None = None
    openrouter_api_key: str | None = field(default=None, repr=False)
    openrouter_base_url: str | None = None
    deepseek_api_key: str | None = field(default=None, repr=False)
    deepseek_base_url: str | None = None
    local_cache: str | None = None
    google_api_key: str | None = field(default=None, repr=False)  # Gemini (`google:`)
    google_base_url: str | None = None

    def __repr__(self) -> str:
        return repr_without_secrets(self)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        home: str | Path | None = None,
        database: str | Path | None = None,
        provider: str | None = None,
        model: str | None = None,
        anthropic_api_key: str | None = None,
        anthropic_base_url: str | None = None,
        openai_api_key: str | None = None,
        openai_base_url: str | None = None,
        telemetry: TelemetrySettings | None = None,
        **providers: str | None,
    ) -> Config:
        """Settings from `env` (the caller's environment, e.g. `os.environ`, or `{}` for
        none), with the arguments on top; an argument left as None was not given.

        A variable set to an empty string counts as unset. The database follows the home:
        with neither STOKER_DATABASE_URL nor STOKER_DB, it is `stoker.db` in the home.
        OpenTelemetry is on when the OTEL_* variables name an exporter or endpoint
        (`TelemetrySettings.from_env`), or when `telemetry` is given. `providers` sets the
        other providers' fields by name (`aws_region="eu-west-1"`, `local_cache="vllm"`).
        """

        def pick(name: str, given: str | Path | None) -> str | None:
            if given is not None:
                return str(given).strip() or None
            for variable in ENVIRONMENT.get(name, ()):
                value = env.get(variable, "").strip()
                if value:
                    return value
            return None

        root = pick("home", home)
        resolved = Path(root).expanduser() if root else Path(platformdirs.user_data_dir("stoker"))
        return cls(
            home=resolved,
            database=pick("database", database) or str(resolved / DATABASE_FILE),
            provider=pick("provider", provider) or DEFAULT_PROVIDER,
            model=pick("model", model) or DEFAULT_MODEL,
            anthropic_api_key=pick("anthropic_api_key", anthropic_api_key),
            anthropic_base_url=pick("anthropic_base_url", anthropic_base_url),
            openai_api_key=pick("openai_api_key", openai_api_key),
            openai_base_url=pick("openai_base_url", openai_base_url),
            telemetry=telemetry if telemetry is not None else TelemetrySettings.from_env(env),
            **{name: pick(name, providers.get(name)) for name in _MORE_PROVIDERS},
        )

    @property
    def memory_dir(self) -> Path:
        """Where `MemoryStore` keeps MEMORY.md and USER.md (created on the first write)."""
        return self.home / "memory"

    @property
    def prices_file(self) -> Path:
        """Prices for models the catalogue lacks, or that the user pays otherwise for
        (read when a provider or a report is built; it need not exist)."""
        return self.home / PRICES_FILE

    @property
    def sim_cache_file(self) -> Path:
        """Where the embedded simulator on the wall clock keeps its cache entries between
        processes, as a real provider keeps its cache (created on the first call)."""
        return self.home / SIM_CACHE_FILE

    @property
    def skills_dir(self) -> Path:
        """Where `SkillStore` keeps one folder per skill (created on the first write)."""
        return self.home / "skills"

    def api_key_for(self, provider: str) -> str | None:
        """The key of a provider kind or spec: anthropic..., openai... (all OpenAI APIs and
        OpenAI-compatible servers share OPENAI_API_KEY); None for the simulator."""
        family = provider.partition(":")[0].strip().split("-")[0]
        return {
            "anthropic": self.anthropic_api_key,
            "openai": self.openai_api_key,
            "bedrock": self.aws_access_key_id,
            "openrouter": self.openrouter_api_key,
            "deepseek": self.deepseek_api_key,
            "google": self.google_api_key,
        }.get(family)
