"""Anthropic Messages over the official `anthropic` SDK.

The payload is `stoker.wire.dialects.anthropic.render_request(request)`, handed to the
SDK unchanged; the answer is read from the raw JSON body (or the raw SSE lines when
streaming) and parsed by the same dialect, so what the session stores is exactly what
the API returned: thinking blocks with their signatures, tool inputs in the model's key
order. The SDK brings auth, headers and connection handling; its retries are off, so
`stoker.providers.retry` is the only retry policy and its count lands in the record.
"""

from __future__ import annotations

from dataclasses import replace

from stoker.errors import MissingExtra

try:
    import anthropic
except ImportError as exc:  # the SDK comes with the provider's extra
    raise MissingExtra("anthropic", "the anthropic provider", "anthropic") from exc

from stoker.cache.models import ModelInfo, fallback_info, with_prices
from stoker.errors import ConfigError
from stoker.providers._sdk import Answer, ClosesClient, LoopBoundClient, Target, send
from stoker.providers.base import CallContext, Completion
from stoker.wire.dialects import anthropic as dialect
from stoker.wire.dialects import anthropic_stream
from stoker.wire.request import Request

NAME = "anthropic"
KEY_ENV = "ANTHROPIC_API_KEY"
LONG_REQUEST_TOKENS = 21_333  # 10 minutes at the SDK's assumed 128k tokens per hour


class AnthropicProvider(ClosesClient):
    """Claude models through the Messages API (or any server that speaks it)."""

    NAME = NAME
    KEY_ENV = KEY_ENV

    def _start(self) -> None:
        """Without `api_key` (or `base_url`) the SDK finds its own, as `AsyncAnthropic()`
        does: ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN (ANTHROPIC_BASE_URL)."""
        self._client = LoopBoundClient(self._new_client)
        if self._api_key is None:
            found = self._new_client()  # the SDK reads its variables when it is built
            if found.api_key is None and found.auth_token is None:
                raise ConfigError(
                    f"the anthropic provider has no API key: set {KEY_ENV} (the anthropic "
                    "SDK reads it), or pass one (api_key=..., or a Config that holds it)"
                )

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r})"

    def model_info(self, model: str) -> ModelInfo:
        """Known models from the table; a new one gets Anthropic's usual facts. Priced by
        the user's overrides, else the catalogue (a model neither prices costs "unknown")."""
        return with_prices(fallback_info(model, "anthropic"), self.prices, model)

    def _new_client(self) -> anthropic.AsyncAnthropic:
        # None: the SDK's own (its environment variables, else its default URL)
        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.retry.timeouts.for_sdk(),
        )

    async def complete(self, request: Request, context: CallContext) -> Completion:
        # The SDK refuses a non-streamed call that may run past 10 minutes (max_tokens
        # above ~21k); streamed, the answer is the same message, so those calls stream.
        long = request.max_tokens > LONG_REQUEST_TOKENS
        stream = request.stream or context.streams or long
        if stream != request.stream:
            request = replace(request, stream=stream)
        payload = dialect.render_request(request)
        target = Target(
            sdk=anthropic,
            provider=NAME,
            model=request.prefix.params.model,
            key_env=self.key_env,
            where=self.base_url or "the Anthropic API",
            timeouts=self.retry.timeouts,
        )

        async def attempt() -> Answer:
            return await send(
                self._client.get().messages,
                payload,
                target=target,
                parse=dialect.parse_response,
                stream=stream,
                accumulator=anthropic_stream.Accumulator(),
                on_text=context.on_text,
                on_thinking=context.on_thinking,
            )

        answer, started, retries = await self._attempts(attempt)
        return Completion(
            message=answer.message, usage=answer.usage, started_at=started, retries=retries
        )
