"""A provider from one string, as a user types it on the command line or in a config file.

    sim:  /  sim:MODEL                        the embedded simulator (the default); on
                                              the wall clock with a `config`, its cache
                                              is kept in the home (sim-cache.db)
    anthropic:MODEL                           Anthropic; anthropic_api_key, anthropic_base_url
    openai:MODEL                              OpenAI Responses; openai_api_key, openai_base_url
    openai-chat:MODEL                         OpenAI Chat Completions; the same settings
    openai-compatible:URL#MODEL               a vLLM / SGLang / llama.cpp / Ollama / OpenRouter
                                              server's Chat Completions at URL (openai_api_key
                                              if set, else the placeholder "EMPTY" those accept)
    openai-compatible+vllm:URL#MODEL          the same on vLLM or llama.cpp, whose cache rules
    openai-compatible+llamacpp:URL#MODEL      then apply (or `--cache vllm|llamacpp`, the
                                              config's local_cache): a zero price, cost in
                                              prefill time
    bedrock:MODEL_ID                          Claude on Bedrock (Converse, the AWS SDK);
                                              aws_access_key_id + aws_secret_access_key (or
                                              aws_profile), aws_region, bedrock_base_url
    openrouter:MODEL                          OpenRouter; openrouter_api_key, _base_url
    deepseek:MODEL                            DeepSeek; deepseek_api_key, deepseek_base_url
    google:MODEL                              Gemini (the Gemini API over google-genai, the
                                              `google` extra); google_api_key, _base_url

Keys and base URLs come from a `stoker.config.Config`, which the CLI resolves from the
environment (ANTHROPIC_API_KEY, ...); never from the string: a key in a provider string
would end up in shell history, process lists and logs. This module reads no environment:
where the settings hold no key (or no `config` is given), the official SDK finds its own
the way it always does (`anthropic.AsyncAnthropic()` reads ANTHROPIC_API_KEY and
ANTHROPIC_BASE_URL; `openai.AsyncOpenAI()`, `genai.Client()` and the AWS SDK theirs), so
`Agent("anthropic:claude-sonnet-4-6")` works wherever the SDK alone would. OpenRouter and
DeepSeek speak through the `openai` SDK, which would read OpenAI's key: theirs must be
given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.cache.prices import PriceBook
from stoker.clock import Clock, SystemClock
from stoker.config import DEFAULT_PROVIDER, Config
from stoker.errors import ConfigError
from stoker.providers.base import Provider
from stoker.providers.retry import RetryPolicy
from stoker.providers.sim.cache_file import SimCacheFile
from stoker.providers.sim.provider import SimProvider

KINDS = (
    "sim",
    "anthropic",
    "openai",
    "openai-chat",
    "openai-compatible",
    "bedrock",
    "openrouter",
    "deepseek",
    "google",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderChoice:
    """The provider a string names, and its model when the string names one."""

    provider: Provider
    model: str | None = None


def select_provider(
    spec: str = DEFAULT_PROVIDER,
    *,
    config: Config | None = None,
    clock: Clock | None = None,
    retry: RetryPolicy | None = None,
) -> ProviderChoice:
    """The provider `spec` names (see the module docstring), with keys and base URLs from
    `config`; those it lacks (all, without one) are the SDK's own. The providers price
    models by `config`'s prices file over the catalogue. The simulator keeps its cache in
    `config`'s home when it runs on the wall clock (`clock` None or the system clock)."""
    kind, _, rest = spec.strip().partition(":")
    kind, _, engine = kind.partition("+")
    model = rest.strip() or None
    prices = PriceBook.load(config.prices_file) if config is not None else None
    if is_simulator(spec):
        wall = clock is None or type(clock) is SystemClock
        kept = SimCacheFile(config.sim_cache_file) if config is not None and wall else None
        sim = SimProvider(clock=clock or SystemClock(), prices=prices, cache_file=kept)
        return ProviderChoice(provider=sim, model=model)
    # No settings: the SDKs find their own keys and URLs.
    anthropic_key, anthropic_url, openai_key, openai_url = (
        (
            config.anthropic_api_key,
            config.anthropic_base_url,
            config.openai_api_key,
            config.openai_base_url,
        )
        if config is not None
        else (None, None, None, None)
    )
    common: dict[str, Any] = {"clock": clock, "retry": retry, "prices": prices}
    # The SDKs take a second to import: only a provider that uses one pays for it.
    if kind == "anthropic":
        from stoker.providers.anthropic import AnthropicProvider

        provider: Provider = AnthropicProvider(
            api_key=anthropic_key, base_url=anthropic_url, **common
        )
        return ProviderChoice(provider=provider, model=model)
    if kind == "google":
        from stoker.providers.google import GoogleProvider

        provider = GoogleProvider(
            api_key=config.google_api_key if config else None,
            base_url=config.google_base_url if config else None,
            **common,
        )
        return ProviderChoice(provider=provider, model=model)
    more = _more(kind, rest, spec, engine, config, **common)
    if more is not None:
        return more
    from stoker.providers.openai import OpenAIProvider

    if kind in ("openai", "openai-chat"):
        provider = OpenAIProvider(
            api_key=openai_key,
            api="responses" if kind == "openai" else "chat",
            base_url=openai_url,
            **common,
        )
        return ProviderChoice(provider=provider, model=model)
    if kind == "openai-compatible":
        url, _, name = rest.rpartition("#")
        url = url.strip() or openai_url or ""
        if not url or not name.strip():
            raise ConfigError(
                f"cannot read {spec!r}: write openai-compatible:URL#MODEL, "
                "e.g. openai-compatible:http://127.0.0.1:8000/v1#qwen3-8b"
            )
        provider = OpenAIProvider(
            api_key=openai_key or "EMPTY",
            api="chat",
            base_url=url.strip(),
            name="openai-compatible",
            **common,
        )
        return ProviderChoice(provider=provider, model=name.strip())
    raise ConfigError(f"unknown provider {kind!r} in {spec!r}; expected one of: {', '.join(KINDS)}")


def is_simulator(spec: str) -> bool:
    """Whether `spec` names the embedded simulator ("sim:", "sim:MODEL", or nothing)."""
    return spec.strip().partition(":")[0].partition("+")[0].strip() in ("", "sim")


def spec_model(spec: str) -> str | None:
    """The model `spec` names after its kind ("sim:gpt-5.6" -> "gpt-5.6"), None if none."""
    return spec.strip().partition(":")[2].strip() or None


def _more(
    kind: str,
    rest: str,
    spec: str,
    engine: str,
    config: Config | None,
    *,
    clock: Clock | None,
    retry: RetryPolicy | None,
    prices: PriceBook | None,
) -> ProviderChoice | None:
    """Bedrock, OpenRouter, DeepSeek and the local servers (None for another kind)."""
    settings = config if config is not None else Config.from_env({})
    model = rest.strip() or None
    common: dict[str, Any] = {"clock": clock, "retry": retry, "prices": prices}
    provider: Provider
    if kind == "bedrock":
        from stoker.providers.bedrock import BedrockProvider

        provider = BedrockProvider(
            region=settings.aws_region,
            access_key_id=settings.aws_access_key_id,
            secret_access_key=settings.aws_secret_access_key,
            session_token=settings.aws_session_token,
            profile=settings.aws_profile,
            base_url=settings.bedrock_base_url,
            **common,
        )
        return ProviderChoice(provider=provider, model=model)
    if kind in ("openrouter", "deepseek"):
        from stoker.providers.compat import DeepSeekProvider, OpenRouterProvider

        key = getattr(settings, f"{kind}_api_key") or ""
        url = getattr(settings, f"{kind}_base_url")
        cls = OpenRouterProvider if kind == "openrouter" else DeepSeekProvider
        provider = cls(api_key=key, base_url=url, **common)
        return ProviderChoice(provider=provider, model=model)
    engine = engine or (settings.local_cache or "" if kind == "openai-compatible" else "")
    if kind != "openai-compatible" or not engine:
        return None
    from stoker.providers.compat import ENGINES, LocalProvider

    url, _, name = rest.rpartition("#")
    url = url.strip() or settings.openai_base_url or ""
    if not url or not name.strip():
        raise ConfigError(
            f"cannot read {spec!r}: write openai-compatible+{engine}:URL#MODEL, "
            "e.g. openai-compatible+vllm:http://127.0.0.1:8000/v1#qwen3-8b"
        )
    if engine not in ENGINES:
        raise ConfigError(f"unknown server {engine!r} in {spec!r}; expected {', '.join(ENGINES)}")
    provider = LocalProvider(
        base_url=url.strip(),
        engine=engine,
        api_key=settings.openai_api_key or "EMPTY",
        **common,
    )
    return ProviderChoice(provider=provider, model=name.strip())
