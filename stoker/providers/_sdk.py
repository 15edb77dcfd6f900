"""What the Anthropic and OpenAI adapters share: one SDK client per event loop, one way
to send a rendered payload and get its parsed answer back (streamed or not), and one
mapping from SDK exceptions to Stoker's errors."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

import httpx2

from stoker.errors import ProviderError, ProviderTimeout
from stoker.providers._adapter import SdkAdapter
from stoker.providers.retry import (
    RetryableError,
    Timeouts,
    error_message,
    failure,
    parse_body,
    read_stream,
    sdk_arguments,
)
from stoker.wire.messages import AssistantMessage
from stoker.wire.usage import Usage

C = TypeVar("C")


class LoopBoundClient(Generic[C]):
    """An SDK client for the running event loop: a connection pool cannot cross loops,
    so a new loop gets a new client."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._client: C | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()  # type: ignore[attr-defined]
            self._client = None


class ClosesClient(SdkAdapter):
    """An adapter holding a `LoopBoundClient` in `_client`, closed by `aclose()`."""

    _client: LoopBoundClient[Any]

    async def aclose(self) -> None:
        """Close the HTTP connections (call it when the provider is no longer needed)."""
        await self._client.aclose()


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A parsed answer and the raw body it came from (OpenAI reads cache facts off it)."""

    message: AssistantMessage
    usage: Usage
    body: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Whom a call goes to: the SDK module whose exceptions it raises (`anthropic` or
    `openai`), and the names and limits its errors are worded with."""

    sdk: ModuleType
    provider: str
    model: str
    key_env: str
    where: str  # the base URL, or "the Anthropic API"
    timeouts: Timeouts


Parse = Callable[[Any], tuple[AssistantMessage, Usage]]


async def send(
    resource: Any,
    payload: dict[str, Any],
    *,
    target: Target,
    parse: Parse,
    stream: bool,
    accumulator: Any,
    on_text: Callable[[str], object] | None,
    on_thinking: Callable[[str], object] | None = None,
) -> Answer:
    """One attempt: `payload` through `resource.create`, and the answer `parse` reads from
    the raw JSON body (assembled from SSE if streamed). Parsed here, inside the attempt, so
    an answer that does not parse is retried like a 5xx instead of escaping as a bare
    WireError; the SDK's exceptions come out as Stoker's errors."""

    def answer(body: Any) -> Answer:
        message, usage = parse(body)
        return Answer(message=message, usage=usage, body=body)

    arguments = sdk_arguments(resource.create, payload)
    try:
        if stream:
            return await read_stream(
                resource.with_streaming_response.create(**arguments),
                accumulator,
                parse=answer,
                on_text=on_text,
                on_thinking=on_thinking,
                provider=target.provider,
                first_byte=target.timeouts.first_byte,
            )
        raw = await resource.with_raw_response.create(**arguments)
        # Both SDKs wrap the HTTP response; its bytes are the body exactly as sent.
        http = raw.http_response
        return parse_body(await http.aread(), http.headers.get("content-type", ""), answer)
    except target.sdk.APIError as exc:
        # 401/403 are never chained: the server's text may echo the key.
        auth = getattr(exc, "status_code", None) in (401, 403)
        raise _mapped_error(exc, target) from (None if auth else exc)


def _mapped_error(exc: Any, target: Target) -> Exception:
    """The Stoker error for an SDK exception (a `RetryableError` when a retry may help)."""
    provider, timeouts = target.provider, target.timeouts
    if isinstance(exc, target.sdk.APIStatusError):
        message = getattr(exc, "api_message", None) or error_message(exc.body, exc.message)
        return failure(
            provider,
            exc.status_code,
            message,
            headers=exc.response.headers,
            model=target.model,
            key_env=target.key_env,
        )
    if isinstance(exc.__cause__, httpx2.ConnectTimeout | httpx2.PoolTimeout):
        return RetryableError(
            f"could not connect to {target.where} within {timeouts.connect:g} s (the connect "
            "timeout)",
            timed_out="connect",
        )
    if isinstance(exc.__cause__, httpx2.TimeoutException):  # a read or write ran past `total`
        return ProviderTimeout(
            f"{provider} did not answer within {timeouts.total:g} s (the total timeout)",
            provider=provider,
            phase="total",
        )
    if isinstance(exc, target.sdk.APIConnectionError):
        return RetryableError(f"could not reach {target.where}: {exc.message}")
    return ProviderError(f"{provider} call failed: {exc.message}", provider=provider)
