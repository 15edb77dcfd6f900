"""`stoker serve` settings from a TOML file and the environment, resolved once.

    host = "127.0.0.1"
    port = 8765
    database = "postgresql://stoker@db/stoker"   # or a SQLite path; default: Config.database

    [agent]                       # the agent every new session starts from
    provider = "sim"              # sim | anthropic | openai | openai-compatible | google
    model = "claude-sonnet-4-6"   # or "anthropic:claude-sonnet-4-6", naming its provider
    api_key_env = "ANTHROPIC_API_KEY"   # keys come from the environment, never the file
    system_file = "prompt.md"     # or system = "..."
    ephemeral_prompt = ""         # a note sent with each user message (not in the prefix)
    reasoning = "high"            # optional effort
    workspace = "notes"           # optional: read-only workspace tools, shared by all users

    [limits]                      # defaults: stoker.config.GatewayLimits
    max_body_bytes = 1048576
    max_message_chars = 100000

    [cache]
    size = 128
    idle_ttl_seconds = 3600
    key_scope = "agent"           # OpenAI cache keys shared by all users of the agent, or
                                  # "user": each user's own (no shared cache routing)

    [keep_warm]                   # the time policy's timers (see stoker.cache.time_policy)
    enabled = true
    hourly_usd = 5.0              # optional: the most all sessions spend in any hour
    total_usd = 100.0             # optional: the most this process ever spends

    [store]                       # PostgreSQL only (stoker.store.postgres_pool.PoolSettings)
    pool_size = 10                # connections per replica: replicas x this < max_connections
    wait_seconds = 5              # the longest a request waits for the database: then 503

    [lifecycle]
    grace_seconds = 30            # on SIGTERM, how long running turns may take to finish

    [approvals]                   # risky tool calls of streamed messages (gateway.approvals)
    timeout_seconds = 240         # no answer by then denies (by "timeout"); keep it under
                                  # the 5-minute cache lifetime so the next call still reads

    [timeouts]                    # each provider call; why these: stoker.providers.retry.Timeouts
    connect_seconds = 10          # no connection: retried
    first_byte_seconds = 120      # a streamed answer that does not start: retried
    total_seconds = 600           # the whole call, retries included: 504 provider_timeout

    [memory]                      # each user's own memory (stoker.gateway.memory)
    directory = "memory"          # MEMORY.md and USER.md per user below it (replicas: share it)
    review_every = 5              # a background review saves what to keep every N turns (0: off)

    [[users]]
    id = "alice"
    token_sha256 = "..."          # or token = "..." (hashed when loaded, never kept)

    [platforms.telegram]          # chat platforms: stoker.platforms.config reads these
    token_env = "TELEGRAM_BOT_TOKEN"  # tables (`read_tables`); the gateway lets them be
    allowed_users = [123456789]

With no `[agent]` table, sessions start from the starter agent (`starter_agent`), the one
the example config `stoker serve` prints describes: on the simulator, the workspace
assistant's system prompt (past the model's caching minimum), the read-only workspace
tools over `notes` (beside the file; in the working directory without one) and keep-warm
on, so a session's second message reads its prefix from the cache. An `[agent]` table
describes its agent whole: what it leaves out takes the library's defaults (a short
system prompt, no tools).

The embedded simulator keeps its cache in the Stoker home (`sim_cache`,
`stoker.providers.sim.cache_file`), so a restarted gateway reads what it wrote before.

Environment variables override the file: STOKER_GATEWAY_HOST, _PORT, _DATABASE,
_DATABASE_FILE (a file holding the location, e.g. a mounted secret), _POOL_SIZE,
_GRACE_SECONDS, _PROVIDER, _MODEL, _BASE_URL, _API_KEY and _TOKENS
("alice=TOKEN,bob=sha256:HEX"). The
environment is the caller's to give (`stoker serve` passes its own); the database and
the provider key default to what `stoker.config.Config.from_env` resolves from it.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stoker.agent.keepwarm import SpendLimits
from stoker.agent.review import ReviewConfig
from stoker.agent.system_prompt import DEFAULT_SYSTEM
from stoker.config import (
    DEFAULT_LIMITS,
    Config,
    GatewayLimits,
    TelemetrySettings,
    repr_without_secrets,
)
from stoker.errors import ConfigError
from stoker.gateway.approvals import DEFAULT_TIMEOUT
from stoker.gateway.auth import TokenTable, token_digest
from stoker.gateway.session_settings import SessionSettings, parse_reasoning
from stoker.providers.retry import Timeouts
from stoker.providers.select import KINDS
from stoker.store.postgres_pool import PoolSettings
from stoker.toolsets.workspace import WORKSPACE_SYSTEM


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_SESSION = SessionSettings()  # the file's [agent] defaults are the library's


class _Agent(_Strict):
    provider: str = _SESSION.provider
    model: str = _SESSION.model
    base_url: str | None = None
    api_mode: str | None = None
    api_key_env: str | None = None
    system: str | None = None
    system_file: str | None = None
    ephemeral_prompt: str = ""
    toolsets: list[str] | None = None
    disabled_toolsets: list[str] = []
    reasoning: str | None = None
    thinking_budget: int | None = Field(default=None, ge=1024)
    max_tokens: int = Field(default=_SESSION.max_tokens, ge=1)
    fallbacks: list[str] = []  # "PROVIDER:MODEL" entries tried in order when it is down
    fallback_cooldown_seconds: float = Field(default=0.0, ge=0)
    workspace: str | None = None


def starter_agent() -> _Agent:
    """The agent of a config with no `[agent]` table, and of the example config `stoker
    serve` prints (`starter_agent_toml`): one definition, so what a newcomer runs first and
    what they copy are the same agent, and both cache from the second message on."""
    return _Agent(workspace="notes", system=WORKSPACE_SYSTEM)


def starter_agent_toml() -> str:
    """`starter_agent` as the `[agent]` table of a config file, commented for a newcomer."""
    a = starter_agent()

    def line(key: str, value: str, comment: str = "") -> str:
        text = f"{key} = {json.dumps(value)}"
        return f"{text:<30}# {comment}\n" if comment else text + "\n"

    return (
        "# The agent every new session starts from (a file with no [agent] table gets it too).\n"
        "# Its tools and system prompt are the prefix each message sends first: the first\n"
        "# message of a session writes it to the cache and the next ones read it (a prefix\n"
        "# under the model's minimum is never cached).\n"
        "[agent]\n"
        + line(
            "provider", a.provider, 'or anthropic / openai, with api_key_env = "ANTHROPIC_API_KEY"'
        )
        + line("model", a.model)
        + line(
            "workspace",
            a.workspace or "",
            "a folder beside this file whose files the agent may list,",
        )
        + f"{'':<30}# read, search and count (put your notes there); never writes\n"
        + "system = '''\n"  # a literal string: the prompt as written, no escapes
        + (a.system or "")
        + "'''\n"
    )


class _Limits(_Strict):
    max_body_bytes: int = Field(default=DEFAULT_LIMITS.max_body_bytes, ge=1024)
    max_message_chars: int = Field(default=DEFAULT_LIMITS.max_message_chars, ge=1)


class _Cache(_Strict):
    size: int = Field(default=DEFAULT_LIMITS.cache_size, ge=1)
    idle_ttl_seconds: float = Field(default=DEFAULT_LIMITS.idle_ttl, gt=0)
    key_scope: Literal["agent", "user"] = "agent"


class _KeepWarm(_Strict):
    enabled: bool = True
    hourly_usd: float | None = Field(default=None, ge=0)
    total_usd: float | None = Field(default=None, ge=0)


_TIMEOUTS = Timeouts()


class _Timeouts(_Strict):
    connect_seconds: float = Field(default=_TIMEOUTS.connect, gt=0)
    first_byte_seconds: float = Field(default=_TIMEOUTS.first_byte, gt=0)
    total_seconds: float = Field(default=_TIMEOUTS.total, gt=0)


_POOL = PoolSettings()
MAX_POOL = 1000  # connections per replica; PostgreSQL's own limit is far lower
MAX_GRACE = 86_400.0  # a day: anything longer is a mistake, not a drain


class _Store(_Strict):
    pool_size: int = Field(default=_POOL.size, ge=1, le=MAX_POOL)
    wait_seconds: float = Field(default=_POOL.wait, gt=0, le=600)


class _Lifecycle(_Strict):
    grace_seconds: float = Field(default=30.0, ge=0, le=MAX_GRACE)


class _Approvals(_Strict):
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=MAX_GRACE)


class _Memory(_Strict):
    directory: str  # each user's MEMORY.md and USER.md in a directory of their own here
    review_every: int = Field(default=5, ge=0)  # user turns between memory reviews (0: off)
    review_model: str | None = None  # reviews on another model (another cache: see docs)


class _User(_Strict):
    id: str
    token_sha256: str | None = None
    token: str | None = Field(default=None, repr=False)


class _File(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    database: str | None = None
    agent: _Agent = Field(default_factory=starter_agent)  # no [agent] table: the starter
    limits: _Limits = _Limits()
    cache: _Cache = _Cache()
    keep_warm: _KeepWarm = _KeepWarm()
    timeouts: _Timeouts = _Timeouts()
    store: _Store = _Store()
    lifecycle: _Lifecycle = _Lifecycle()
    approvals: _Approvals = _Approvals()
    memory: _Memory | None = None
    users: list[_User] = []
    platforms: dict[str, Any] = {}  # [platforms.*]: read by stoker.platforms.config


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig:
    """Resolved settings of one gateway process. Its repr shows neither the provider key
    nor a database password, so it can be logged.

    `database` None means the caller hands `build_gateway` its store; `load_config`
    always resolves one.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    database: str | None = None
    defaults: SessionSettings = field(default_factory=SessionSettings)
    api_key: str | None = field(default=None, repr=False)
    tokens: TokenTable = field(default_factory=lambda: TokenTable({}))
    limits: GatewayLimits = DEFAULT_LIMITS
    workspace: Path | None = None
    keep_warm: bool = True
    keep_warm_limits: SpendLimits = field(default_factory=SpendLimits)
    cache_key_scope: Literal["agent", "user"] = "agent"
    timeouts: Timeouts = field(default_factory=Timeouts)
    telemetry: TelemetrySettings | None = None  # OpenTelemetry export (the OTEL_* variables)
    pool: PoolSettings = field(default_factory=PoolSettings)
    grace: float = 30.0  # seconds running turns get to finish on SIGTERM
    approval_timeout: float = DEFAULT_TIMEOUT  # seconds a risky call waits for its answer
    memory_dir: Path | None = None  # per-user memory (None: off)
    review: ReviewConfig | None = None  # background memory reviews after turns
    # Where the embedded simulator keeps its cache between processes (None: in memory).
    sim_cache: Path | None = None

    def __repr__(self) -> str:
        return repr_without_secrets(self)


def _tokens(users: list[_User], env_value: str | None) -> TokenTable:
    digests: dict[str, str] = {}
    for u in users:
        if (u.token is None) == (u.token_sha256 is None):
            raise ConfigError(f"user {u.id!r}: give exactly one of token or token_sha256")
        digests[u.token_sha256.lower() if u.token_sha256 else token_digest(u.token or "")] = u.id
    for pair in (env_value or "").split(","):
        if not pair.strip():
            continue
        user, sep, secret = pair.strip().partition("=")
        if not sep or not secret:
            raise ConfigError("STOKER_GATEWAY_TOKENS: write user=TOKEN or user=sha256:HEX pairs")
        digest = secret[7:].lower() if secret.startswith("sha256:") else token_digest(secret)
        digests[digest] = user
    return TokenTable(digests)


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def read_tables(path: str | Path | None) -> tuple[dict[str, Any], Path]:
    """The config file's tables, and the folder its relative paths start from (with no
    file: none, and the working directory). Whoever runs beside the gateway reads its
    own tables with it (the chat platforms, `[platforms.*]`)."""
    if path is None:
        return {}, Path.cwd()
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the gateway config {p}: {exc}") from exc
    return raw, p.resolve().parent


def problems(exc: ValidationError, *, under: str = "") -> str:
    """A validation error's problems on one line, each at its dotted place in the file
    (`under`: the table the validated part came from, e.g. "platforms")."""
    return "; ".join(
        f"{'.'.join(str(x) for x in ([under] if under else []) + list(e['loc']))}: {e['msg']}"
        for e in exc.errors()
    )


def load_config(path: str | Path | None, *, env: Mapping[str, str]) -> GatewayConfig:
    """Settings from `path` (None: no file) with `env` on top (the caller's environment;
    `stoker serve` passes its own)."""
    settings = Config.from_env(env)
    raw, base = read_tables(path)
    try:
        f = _File.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"gateway config {path}: {problems(exc)}") from None
    a = f.agent
    system = a.system if a.system is not None else DEFAULT_SYSTEM
    if a.system_file:
        try:
            system = _path(base, a.system_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read system_file {a.system_file}: {exc}") from exc
    provider, model = _provider_and_model(
        env.get("STOKER_GATEWAY_PROVIDER") or a.provider,
        env.get("STOKER_GATEWAY_MODEL") or a.model,
        given=bool(env.get("STOKER_GATEWAY_PROVIDER")) or "provider" in a.model_fields_set,
    )
    defaults = SessionSettings(
        provider=provider,
        model=model,
        base_url=env.get("STOKER_GATEWAY_BASE_URL") or a.base_url,
        api_mode=a.api_mode,
        toolsets=tuple(a.toolsets) if a.toolsets is not None else None,
        disabled_toolsets=tuple(a.disabled_toolsets),
        system=system,
        ephemeral_prompt=a.ephemeral_prompt,
        thinking_budget=a.thinking_budget,
        max_tokens=a.max_tokens,
        fallbacks=tuple(a.fallbacks),
        fallback_cooldown=a.fallback_cooldown_seconds,
    )
    if a.reasoning:
        defaults = replace(defaults, **parse_reasoning(a.reasoning))
    api_key = env.get("STOKER_GATEWAY_API_KEY") or (
        env.get(a.api_key_env) if a.api_key_env else settings.api_key_for(defaults.provider)
    )
    database = (
        env.get("STOKER_GATEWAY_DATABASE")
        or _secret_file(env.get("STOKER_GATEWAY_DATABASE_FILE"))
        or f.database
    )
    if database and "://" not in database:
        database = str(_path(base, database))
    port = env.get("STOKER_GATEWAY_PORT", "")
    if port and not port.isdigit():
        raise ConfigError(f"STOKER_GATEWAY_PORT must be a port number, not {port!r}")
    pool_size = _number(
        env, "STOKER_GATEWAY_POOL_SIZE", f.store.pool_size, low=1, high=MAX_POOL, whole=True
    )
    grace = _number(
        env, "STOKER_GATEWAY_GRACE_SECONDS", f.lifecycle.grace_seconds, low=0, high=MAX_GRACE
    )
    return GatewayConfig(
        host=env.get("STOKER_GATEWAY_HOST") or f.host,
        port=int(port) if port else f.port,
        database=database or settings.database,
        defaults=defaults,
        api_key=api_key or None,
        tokens=_tokens(f.users, env.get("STOKER_GATEWAY_TOKENS")),
        limits=GatewayLimits(
            max_body_bytes=f.limits.max_body_bytes,
            max_message_chars=f.limits.max_message_chars,
            cache_size=f.cache.size,
            idle_ttl=f.cache.idle_ttl_seconds,
        ),
        workspace=_path(base, a.workspace) if a.workspace else None,
        keep_warm=f.keep_warm.enabled,
        keep_warm_limits=SpendLimits(
            hourly_usd=f.keep_warm.hourly_usd, total_usd=f.keep_warm.total_usd
        ),
        cache_key_scope=f.cache.key_scope,
        timeouts=Timeouts(
            connect=f.timeouts.connect_seconds,
            first_byte=f.timeouts.first_byte_seconds,
            total=f.timeouts.total_seconds,
        ),
        telemetry=settings.telemetry,
        pool=PoolSettings(size=int(pool_size), wait=f.store.wait_seconds),
        grace=grace,
        approval_timeout=f.approvals.timeout_seconds,
        memory_dir=_path(base, f.memory.directory) if f.memory else None,
        review=(
            ReviewConfig(memory_every=f.memory.review_every, model=f.memory.review_model)
            if f.memory and f.memory.review_every
            else None
        ),
        sim_cache=settings.sim_cache_file,
    )


# The providers a model may name as `stoker run --provider` and `Agent(...)` take them;
# openai-compatible needs a URL, which is the [agent]'s base_url here.
_NAMED = frozenset(KINDS) - {"openai-compatible"}


def _provider_and_model(provider: str, model: str, *, given: bool) -> tuple[str, str]:
    """The [agent]'s provider and model, where the model may name its provider as the
    command line and `Agent(...)` write it ("anthropic:claude-sonnet-4-6"); unless
    `provider` was `given` as another one, which is a `ConfigError`. A model id with a
    colon that names no provider (Bedrock's "...-v1:0") is left whole."""
    kind, sep, name = model.partition(":")
    if not sep or not name or kind not in _NAMED:
        return provider, model
    if given and provider != kind:
        raise ConfigError(
            f"[agent] model {model!r} names the {kind} provider, but provider is "
            f"{provider!r}: write provider = {kind!r} and model = {name!r}, or name no "
            "provider in the model"
        )
    return kind, name


def _number(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    low: float,
    high: float,
    whole: bool = False,
) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    kind = "a whole number" if whole else "a number"
    try:
        if whole and not (raw.isascii() and raw.isdigit()):
            raise ValueError(raw)  # int() would take "+5", "1_0" and other scripts' digits
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be {kind}, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be from {low:g} to {high:g}, not {raw[:40]!r}")
    return value


def _secret_file(path: str | None) -> str | None:
    """The first line of `path` (a mounted secret holding the database location)."""
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read STOKER_GATEWAY_DATABASE_FILE {path}: {exc}") from exc
    if not text:
        raise ConfigError(f"STOKER_GATEWAY_DATABASE_FILE {path} is empty")
    return text.splitlines()[0]
