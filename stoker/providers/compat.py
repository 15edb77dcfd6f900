"""OpenRouter, DeepSeek and self-hosted servers: Chat Completions APIs reached through the
official `openai` SDK, each with its own dialect and its own cache rules.

They are `OpenAIProvider`s pointed at another base URL; what differs is data: the dialect
that renders the body (`stoker.wire.dialects.openrouter`, `deepseek`, `vllm_chat`,
`llamacpp_chat`), the model family whose facts apply (`ModelInfo`: OpenRouter's Claude
names keep Anthropic's markers; DeepSeek's and a local server's caches are automatic),
and what each reports beside the usage: OpenRouter its cost, llama.cpp its timings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal, Unpack

from stoker.cache.models import Family, ModelInfo, fallback_info, with_prices
from stoker.cache.prices import PriceBook
from stoker.clock import Clock
from stoker.errors import ConfigError
from stoker.providers._adapter import AdapterOptions
from stoker.providers.openai import QUIRKS, OpenAIProvider, ServerQuirks
from stoker.providers.retry import RetryPolicy
from stoker.wire.dialects import llamacpp_chat, openrouter

OPENROUTER_URL = "https://openrouter.ai/api/v1"
DEEPSEEK_URL = "https://api.deepseek.com"
Engine = Literal["vllm", "llamacpp"]
ENGINES: tuple[Engine, ...] = ("vllm", "llamacpp")
_DEEPSEEK = ServerQuirks(
    name="deepseek",
    sends_cache_key=False,
    unreported="DeepSeek reported no prompt_cache_hit_tokens, so reads show as 0",
)


def _own_key(api_key: str, name: str, key_env: str) -> str:
    """The key a caller gave: never left to the `openai` SDK, which would send OpenAI's
    key (OPENAI_API_KEY) to another company's API."""
    if not api_key:
        raise ConfigError(
            f"the {name} provider needs an API key: set {key_env} and pass "
            "config=Config.from_env(os.environ), or pass api_key=..."
        )
    return api_key


class _KeyedProvider(OpenAIProvider):
    """A hosted Chat Completions API with a key of its own: what differs between them is
    the data of the subclass (its name, URL, quirks, dialect, key variable, and the model
    families whose facts it serves)."""

    NAME: ClassVar[Family]
    URL: str
    SERVER_QUIRKS: ServerQuirks
    DIALECT: str
    KEY_ENV: ClassVar[str]
    FAMILIES: tuple[str, ...]

    def __init__(self, *, api_key: str, **options: Unpack[AdapterOptions]) -> None:
        key_env = options["key_env"] = options.get("key_env") or self.KEY_ENV
        options["base_url"] = options.get("base_url") or self.URL
        super().__init__(
            api_key=_own_key(api_key, self.NAME, key_env),
            api="chat",
            name=self.NAME,
            quirks=self.SERVER_QUIRKS,
            dialect=self.DIALECT,
            **options,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def model_info(self, model: str) -> ModelInfo:
        """The table's facts for a model of a family this API serves; another name gets
        the API's own defaults, with no model-specific cache rules."""
        info = fallback_info(model, self.NAME)
        if info.provider not in self.FAMILIES:
            info = replace(fallback_info("", self.NAME), name=model)
        return with_prices(info, self.prices, model)


class OpenRouterProvider(_KeyedProvider):
    """Models through OpenRouter: Claude with its markers passed through, GPT and Gemini
    cached by their own rules (`openai/...` as OpenAI's models), every session on its
    sticky upstream (`session_id`)."""

    NAME = "openrouter"
    URL = OPENROUTER_URL
    SERVER_QUIRKS = QUIRKS["openrouter"]
    DIALECT = "openrouter_chat"
    KEY_ENV = "OPENROUTER_API_KEY"
    FAMILIES = ("openrouter", "openai")

    def _cost(self, body: dict[str, Any]) -> float | None:
        return openrouter.reported_cost(body)


class DeepSeekProvider(_KeyedProvider):
    """DeepSeek's models, with their automatic disk cache."""

    NAME = "deepseek"
    URL = DEEPSEEK_URL
    SERVER_QUIRKS = _DEEPSEEK
    DIALECT = "deepseek_chat"
    KEY_ENV = "DEEPSEEK_API_KEY"
    FAMILIES = ("deepseek",)


class LocalProvider(OpenAIProvider):
    """A self-hosted model on vLLM or llama.cpp: its cost is prefill time, not money.
    Every call reports the tokens it read from the server's KV cache and, where the
    server measures it (llama.cpp's `timings`), the prefill time that saved."""

    def __init__(
        self,
        *,
        base_url: str,
        engine: Engine,
        api_key: str = "EMPTY",
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        prices: PriceBook | None = None,
    ) -> None:
        if engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        super().__init__(
            api_key=api_key,
            api="chat",
            base_url=base_url,
            name=f"openai-compatible+{engine}",  # the spec's kind: its rules are the local family's
            quirks=QUIRKS["vllm" if engine == "vllm" else "llama.cpp"],
            retry=retry,
            clock=clock,
            prices=prices,
            dialect="vllm_chat" if engine == "vllm" else "llamacpp_chat",
        )
        self.engine = engine

    def __repr__(self) -> str:
        return f"LocalProvider(engine={self.engine!r}, base_url={self.base_url!r})"

    def model_info(self, model: str) -> ModelInfo:
        """Whatever the server loaded: the local family's facts, a zero price."""
        info = fallback_info(model, "local")
        if info.provider != "local":
            info = replace(fallback_info("", "local"), name=model)
        return with_prices(info, self.prices, model)

    def _facts(self, body: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        facts = super()._facts(body)
        saved = llamacpp_chat.prefill_saved(body)
        if saved is not None and saved[0]:
            tokens, seconds = saved
            note = f"prefill saved: {tokens:,} tokens from the KV cache, {seconds:.2f} s"
            facts = (*facts, ("prefill", note))
        return facts
