"""A provider from one string, as a user types it on the command line or in a config file.

    sim:  /  sim:MODEL                        the embedded simulator (the default)
    anthropic:MODEL                           Anthropic; ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
    openai:MODEL                              OpenAI Responses; OPENAI_API_KEY, OPENAI_BASE_URL
    openai-chat:MODEL                         OpenAI Chat Completions; same variables
    openai-compatible:URL#MODEL               a vLLM / SGLang / llama.cpp / Ollama / OpenRouter
                                              server's Chat Completions at URL (OPENAI_API_KEY
                                              if set, else the placeholder "EMPTY" those accept)

Keys come from the environment only: a key in a provider string would end up in shell
history, process lists and logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from stoker.clock import Clock
from stoker.errors import ConfigError
from stoker.providers.base import Provider
from stoker.providers.retry import RetryPolicy
from stoker.providers.sim.provider import SimProvider

DEFAULT = "sim:"
KINDS = ("sim", "anthropic", "openai", "openai-chat", "openai-compatible")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderChoice:
    """The provider a string names, and its model when the string names one."""

    provider: Provider
    model: str | None = None


def _key(env: Mapping[str, str], name: str, kind: str) -> str:
    key = env.get(name, "").strip()
    if not key:
        raise ConfigError(f"--provider {kind}:... needs an API key: set {name}")
    return key


def select_provider(
    spec: str = DEFAULT,
    *,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    retry: RetryPolicy | None = None,
) -> ProviderChoice:
    """The provider `spec` names (see the module docstring); `env` defaults to os.environ."""
    env = os.environ if env is None else env
    kind, _, rest = spec.strip().partition(":")
    model = rest.strip() or None
    if kind in ("", "sim"):
        sim = SimProvider(clock=clock) if clock is not None else SimProvider()
        return ProviderChoice(provider=sim, model=model)
    # The SDKs take a second to import: only a provider that uses one pays for it.
    if kind == "anthropic":
        from stoker.providers.anthropic import AnthropicProvider

        provider: Provider = AnthropicProvider(
            api_key=_key(env, "ANTHROPIC_API_KEY", kind),
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            clock=clock,
            retry=retry,
        )
        return ProviderChoice(provider=provider, model=model)
    from stoker.providers.openai import OpenAIProvider

    if kind in ("openai", "openai-chat"):
        provider = OpenAIProvider(
            api_key=_key(env, "OPENAI_API_KEY", kind),
            api="responses" if kind == "openai" else "chat",
            base_url=env.get("OPENAI_BASE_URL") or None,
            clock=clock,
            retry=retry,
        )
        return ProviderChoice(provider=provider, model=model)
    if kind == "openai-compatible":
        url, _, name = rest.rpartition("#")
        url = url.strip() or env.get("OPENAI_BASE_URL", "")
        if not url or not name.strip():
            raise ConfigError(
                f"cannot read {spec!r}: write openai-compatible:URL#MODEL, "
                "e.g. openai-compatible:http://127.0.0.1:8000/v1#qwen3-8b"
            )
        provider = OpenAIProvider(
            api_key=env.get("OPENAI_API_KEY", "").strip() or "EMPTY",
            api="chat",
            base_url=url.strip(),
            name="openai-compatible",
            clock=clock,
            retry=retry,
        )
        return ProviderChoice(provider=provider, model=name.strip())
    raise ConfigError(f"unknown provider {kind!r} in {spec!r}; expected one of: {', '.join(KINDS)}")
