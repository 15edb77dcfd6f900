"""OpenAI Chat Completions and Responses over the official `openai` SDK, and the
OpenAI-compatible servers (vLLM, SGLang, llama.cpp, Ollama, OpenRouter) through the same code.

As with Anthropic, the payload is the dialect's `render_request(request)` handed to the
SDK unchanged and the answer is parsed from the raw body, so tool-call `arguments` keep
the exact string the model produced (OpenAI hashes it). `prompt_cache_key` is the
session's lineage key, shared by forks, sub-agents and resumes, which keeps the whole
lineage on one cache shard. What the self-hosted servers do differently is data
(`QUIRKS`), not branches: where they report cache reads, whether a cache key means
anything to them, and what to do when they report nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Unpack

from stoker.errors import MissingExtra

try:
    import openai
except ImportError as exc:  # the SDK comes with the provider's extra
    raise MissingExtra("openai", "the openai provider", "openai") from exc

from stoker.cache.models import ModelInfo, fallback_info, known_models, with_prices
from stoker.errors import ConfigError
from stoker.providers._adapter import AdapterOptions
from stoker.providers._sdk import Answer, ClosesClient, LoopBoundClient, Target, send
from stoker.providers.base import CallContext, Completion
from stoker.wire.dialects import (
    dialect_module,
    openai_chat,
    openai_chat_stream,
    openai_responses,
    openai_responses_stream,
)
from stoker.wire.request import Request

Api = Literal["chat", "responses"]
KEY_ENV = "OPENAI_API_KEY"
RETENTIONS = ("in_memory", "24h")

_READS = (
    "usage.prompt_tokens_details.cached_tokens",
    "usage.input_tokens_details.cached_tokens",
    "usage.prompt_cache_hit_tokens",
    "timings.cache_n",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerQuirks:
    """How one OpenAI-compatible server treats the prompt cache (docs/provider-caching.md,
    "OpenAI-compatible servers").

    `read_fields`: where it reports cached tokens (dotted paths in the response body);
    the dialect reads all of them. `sends_cache_key`: whether `prompt_cache_key` does
    anything there (it routes on OpenAI and OpenRouter; local servers ignore it).
    `unreported`: what to do when a response carries none of the fields.
    """

    name: str
    read_fields: tuple[str, ...] = _READS
    sends_cache_key: bool = True
    unreported: str = "the server reported no cached tokens, so reads show as 0"


QUIRKS: dict[str, ServerQuirks] = {
    q.name: q
    for q in (
        ServerQuirks(name="openai"),
        ServerQuirks(name="openrouter"),
        ServerQuirks(name="generic"),
        ServerQuirks(
            name="vllm",
            sends_cache_key=False,
            # vLLM omits prompt_tokens_details (or sends null) unless asked for it.
            unreported="start vLLM with --enable-prompt-tokens-details to see cached tokens",
        ),
        ServerQuirks(
            name="sglang",
            sends_cache_key=False,
            unreported="start SGLang with --enable-cache-report to see cached tokens",
        ),
        ServerQuirks(
            name="llama.cpp",
            sends_cache_key=False,
            # Older llama-server builds report reuse only as timings.cache_n.
            unreported="this llama-server build reports no cache use; check cache_prompt",
        ),
        ServerQuirks(
            name="ollama",
            sends_cache_key=False,
            unreported="Ollama's OpenAI endpoint does not report cached tokens",
        ),
    )
}


def _path(body: dict[str, Any], dotted: str) -> Any:
    value: Any = body
    for key in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


class OpenAIProvider(ClosesClient):
    """OpenAI models, or an OpenAI-compatible server when `base_url` points at one."""

    KEY_ENV = KEY_ENV

    def __init__(
        self,
        *,
        api_key: str | None = None,
        api: Api = "responses",
        name: str = "openai",
        cache_retention: str | None = None,
        quirks: ServerQuirks | None = None,
        dialect: str | None = None,
        **options: Unpack[AdapterOptions],
    ) -> None:
        if api not in ("chat", "responses"):
            raise ConfigError(f"api must be 'chat' or 'responses', not {api!r}")
        if cache_retention is not None and cache_retention not in RETENTIONS:
            raise ConfigError(
                f"cache_retention must be one of {RETENTIONS}, not {cache_retention!r}"
            )
        self.api: Api = api
        self._name = name
        self.cache_retention = cache_retention
        self.quirks = quirks or QUIRKS["openai" if options.get("base_url") is None else "generic"]
        # A compatible API's own Chat dialect (OpenRouter's, DeepSeek's, a local server's).
        self.dialect = dialect
        super().__init__(api_key=api_key, **options)

    def _start(self) -> None:
        """Without `api_key` (or `base_url`) the SDK finds its own, as `AsyncOpenAI()` does:
        OPENAI_API_KEY (OPENAI_BASE_URL)."""
        self._client = LoopBoundClient(self._new_client)
        if self._api_key is None:
            try:
                self._new_client()  # the SDK reads its variables when it is built
            except openai.OpenAIError:
                raise ConfigError(
                    f"the {self._name} provider has no API key: set {KEY_ENV} (the openai "
                    "SDK reads it), or pass one (api_key=..., or a Config that holds it)"
                ) from None

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self._name!r}, api={self.api!r}, base_url={self.base_url!r})"

    @property
    def name(self) -> str:
        return self._name

    def model_info(self, model: str) -> ModelInfo:
        """Known models from the table; others (self-hosted ones) get OpenAI's usual facts,
        but on a compatible server (`base_url`) an unknown model is taken as text only:
        most self-hosted models are, and they refuse an image block. Priced by the user's
        overrides, else the catalogue."""
        info = fallback_info(model, "openai")
        if info.provider != "openai":  # a Claude name served by a compatible server
            info = replace(fallback_info("", "openai"), name=model)
        if self.base_url is not None and info.name not in known_models():
            info = replace(info, images=False)
        return with_prices(info, self.prices, model)

    def _new_client(self) -> openai.AsyncOpenAI:
        # None: the SDK's own (its environment variables, else its default URL)
        options: dict[str, Any] = {} if self.base_url is None else {"base_url": self.base_url}
        if self._api_key is not None:
            options["api_key"] = self._api_key
        return openai.AsyncOpenAI(
            max_retries=0,
            timeout=self.retry.timeouts.for_sdk(),
            **options,
        )

    def _prepared(self, request: Request, stream: bool) -> Request:
        changes: dict[str, Any] = {}
        if stream != request.stream:
            changes["stream"] = stream
        if request.cache_retention is None and self.cache_retention is not None:
            changes["cache_retention"] = self.cache_retention
        if request.cache_key is not None and not self.quirks.sends_cache_key:
            changes["cache_key"] = None
        return replace(request, **changes) if changes else request

    async def complete(self, request: Request, context: CallContext) -> Completion:
        stream = request.stream or context.streams
        request = self._prepared(request, stream)
        module: Any = openai_chat if self.api == "chat" else openai_responses
        if self.dialect is not None:
            module = dialect_module(self.dialect)
        accumulator = (
            openai_chat_stream.Accumulator
            if self.api == "chat"
            else openai_responses_stream.Accumulator
        )
        payload = module.render_request(request)
        target = Target(
            sdk=openai,
            provider=self._name,
            model=request.prefix.params.model,
            key_env=self.key_env,
            where=self.base_url or "the OpenAI API",
            timeouts=self.retry.timeouts,
        )

        async def attempt() -> Answer:
            client = self._client.get()
            resource: Any = client.chat.completions if self.api == "chat" else client.responses
            return await send(
                resource,
                payload,
                target=target,
                parse=module.parse_response,
                stream=stream,
                accumulator=accumulator(),
                on_text=context.on_text,
                on_thinking=context.on_thinking,
            )

        answer, started, retries = await self._attempts(attempt)
        return Completion(
            message=answer.message,
            usage=answer.usage,
            started_at=started,
            retries=retries,
            facts=self._facts(answer.body),
            cost_usd=self._cost(answer.body),
        )

    def _cost(self, body: dict[str, Any]) -> float | None:
        """What the provider says the call cost; OpenAI says nothing (a subclass may)."""
        return None

    def _facts(self, body: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        if any(_path(body, f) is not None for f in self.quirks.read_fields):
            return ()
        return (("unreported", f"{self._name} ({self.quirks.name}): {self.quirks.unreported}"),)
