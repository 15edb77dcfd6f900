"""Anthropic Messages over the official `anthropic` SDK.

The payload is `stoker.wire.dialects.anthropic.render_request(request)`, handed to the
SDK unchanged; the answer is read from the raw JSON body (or the raw SSE lines when
streaming) and parsed by the same dialect, so what the session stores is exactly what
the API returned: thinking blocks with their signatures, tool inputs in the model's key
order. The SDK brings auth, headers and connection handling; its retries are off, so
`stoker.providers.retry` is the only retry policy and its count lands in the record.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import anthropic

from stoker.cache.models import ModelInfo, fallback_info
from stoker.clock import Clock, SystemClock
from stoker.errors import ConfigError, ProviderError
from stoker.providers.base import CallContext, Completion
from stoker.providers.retry import (
    RetryPolicy,
    Transient,
    call_with_retries,
    error_message,
    failure,
    read_stream,
    sdk_arguments,
)
from stoker.wire.dialects import anthropic as dialect
from stoker.wire.dialects import anthropic_stream
from stoker.wire.request import Request

NAME = "anthropic"
KEY_ENV = "ANTHROPIC_API_KEY"
LONG_REQUEST_TOKENS = 21_333  # 10 minutes at the SDK's assumed 128k tokens per hour


class AnthropicProvider:
    """Claude models through the Messages API (or any server that speaks it)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        timeout: float | None = None,
        key_env: str = KEY_ENV,
    ) -> None:
        if not api_key:
            raise ConfigError(f"the anthropic provider needs an API key: set {key_env}")
        self._api_key = api_key
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self.clock: Clock = clock or SystemClock()
        self.timeout = timeout
        self.key_env = key_env
        self._client: anthropic.AsyncAnthropic | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r})"

    @property
    def name(self) -> str:
        return NAME

    def model_info(self, model: str) -> ModelInfo:
        """Known models from the table; a new one gets Anthropic's usual facts, no price."""
        return fallback_info(model, "anthropic")

    def _sdk(self) -> anthropic.AsyncAnthropic:
        # A client's connection pool belongs to one event loop; a new loop gets a new client.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            options: dict[str, Any] = {"timeout": self.timeout} if self.timeout else {}
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url, max_retries=0, **options
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections (call it when the provider is no longer needed)."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete(self, request: Request, context: CallContext) -> Completion:
        # The SDK refuses a non-streamed call that may run past 10 minutes (max_tokens
        # above ~21k); streamed, the answer is the same message, so those calls stream.
        long = request.max_tokens > LONG_REQUEST_TOKENS
        stream = request.stream or context.on_text is not None or long
        if stream != request.stream:
            request = replace(request, stream=stream)
        payload = dialect.render_request(request)
        model = request.prefix.params.model
        started = 0.0

        async def attempt() -> dict[str, Any]:
            nonlocal started
            started = self.clock.now()
            try:
                messages = self._sdk().messages
                arguments = sdk_arguments(messages.create, payload)
                if stream:
                    return await read_stream(
                        messages.with_streaming_response.create(**arguments),
                        anthropic_stream.Accumulator(),
                        on_text=context.on_text,
                        provider=NAME,
                    )
                raw = await messages.with_raw_response.create(**arguments)
                return json.loads(await raw.read())  # type: ignore[no-any-return]
            except anthropic.APIError as exc:
                raise self._mapped(exc, model) from (None if _is_auth(exc) else exc)

        body, retries = await call_with_retries(attempt, policy=self.retry, provider=NAME)
        message, usage = dialect.parse_response(body)
        return Completion(message=message, usage=usage, started_at=started, retries=retries)

    def _mapped(self, exc: anthropic.APIError, model: str) -> Exception:
        if isinstance(exc, anthropic.APIStatusError):
            message = exc.api_message or error_message(exc.body, exc.message)
            return failure(
                NAME,
                exc.status_code,
                message,
                headers=exc.response.headers,
                model=model,
                key_env=self.key_env,
            )
        if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
            where = self.base_url or "the Anthropic API"
            return Transient(f"could not reach {where}: {exc.message}")
        return ProviderError(f"{NAME} call failed: {exc.message}", provider=NAME)


def _is_auth(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) in (401, 403)
