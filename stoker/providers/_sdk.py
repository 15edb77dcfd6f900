"""What the Anthropic and OpenAI adapters share: one SDK client per event loop, one way
to send a rendered payload and get the raw body back (streamed or not), and one mapping
from SDK exceptions to Stoker's errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar

from stoker.errors import ProviderError
from stoker.providers.retry import (
    RetryableError,
    error_message,
    failure,
    read_stream,
    sdk_arguments,
)

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


class ClosesClient:
    """`aclose()` and `async with` for a provider holding a `LoopBoundClient` in `_client`."""

    _client: LoopBoundClient[Any]

    async def aclose(self) -> None:
        """Close the HTTP connections (call it when the provider is no longer needed)."""
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def send(
    resource: Any,
    payload: dict[str, Any],
    *,
    stream: bool,
    accumulator: Any,
    on_text: Callable[[str], object] | None,
    provider: str,
) -> dict[str, Any]:
    """`payload` through `resource.create`; the raw JSON body, assembled from SSE if streamed."""
    arguments = sdk_arguments(resource.create, payload)
    if stream:
        return await read_stream(
            resource.with_streaming_response.create(**arguments),
            accumulator,
            on_text=on_text,
            provider=provider,
        )
    raw = await resource.with_raw_response.create(**arguments)
    # Both SDKs wrap the HTTP response; its bytes are the body exactly as sent.
    return json.loads(await raw.http_response.aread())  # type: ignore[no-any-return]


def mapped_error(
    exc: Any,
    *,
    provider: str,
    model: str,
    key_env: str,
    where: str,
    status_error: type[Any],
    connection_error: type[Any],
) -> Exception:
    """The Stoker error for an SDK exception (a `RetryableError` when a retry may help)."""
    if isinstance(exc, status_error):
        message = getattr(exc, "api_message", None) or error_message(exc.body, exc.message)
        return failure(
            provider,
            exc.status_code,
            message,
            headers=exc.response.headers,
            model=model,
            key_env=key_env,
        )
    if isinstance(exc, connection_error):  # timeouts included
        return RetryableError(f"could not reach {where}: {exc.message}")
    return ProviderError(f"{provider} call failed: {exc.message}", provider=provider)


def is_auth(exc: Exception) -> bool:
    """401/403: their exceptions are never chained, as the server's text may echo the key."""
    return getattr(exc, "status_code", None) in (401, 403)
