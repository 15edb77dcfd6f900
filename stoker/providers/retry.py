"""What every SDK-backed provider shares: one retry policy, failures mapped to errors,
and the rule for a stream that breaks.

The SDKs' own retries are switched off (`max_retries=0`) so this is the only policy:
it counts the retries it made (the cache record shows them), sleeps through an
injectable function (tests do not wait), and honours the server's `retry-after-ms` /
`retry-after` headers. Overload, rate limits, server errors and lost connections are
retried with exponential backoff and full jitter; a rejected request, key or model
fails at once with an error that says what to fix. A stream that breaks before any text
reached the caller is retried like any request; after that it is not, since a retry
would hand the caller the same text twice.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx2

from stoker.errors import AuthenticationError, ConfigError, InvalidRequest, ProviderError
from stoker.wire.dialects.sse import Decoder

log = logging.getLogger(__name__)

T = TypeVar("T")

# 408 is a timeout too; 529 is Anthropic's "overloaded".
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})


class RetryableError(ProviderError):
    """A failure worth retrying: overload, rate limit, server error, lost connection.
    The retry loop turns the last one into a plain `ProviderError` when it gives up."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ):
        super().__init__(message, status=status)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to retry.

    `max_retries` retries follow the first attempt. Without a server hint the n-th retry
    waits a uniformly random time in [0, min(max_delay, base_delay * 2**n)] ("full
    jitter": many clients that failed together do not come back together). A server's
    `retry-after` is obeyed as given; one longer than `max_retry_after` fails at once
    instead of stalling the turn.
    """

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[object]] = field(default=asyncio.sleep, compare=False)
    jitter: Callable[[], float] = field(default=random.random, compare=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ConfigError("retry settings cannot be negative")

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        if retry_after is not None:
            return max(retry_after, 0.0)
        return float(self.jitter() * min(self.max_delay, self.base_delay * 2**retry))


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The server's wait hint: `retry-after-ms`, else `retry-after` (seconds or an HTTP date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        if (ms := lower.get("retry-after-ms")) is not None:
            return float(ms) / 1000.0
        value = lower.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value).timestamp()
            return max(when - (time.time() if now is None else now), 0.0)
    except (ValueError, TypeError, OverflowError):
        return None


def failure(
    provider: str,
    status: int,
    message: str,
    *,
    headers: Mapping[str, str],
    model: str,
    key_env: str,
) -> Exception:
    """The exception for an HTTP error status: a `RetryableError` to retry, or a Stoker error."""
    if status in RETRYABLE_STATUS:
        hint = retry_after_seconds(headers)
        return RetryableError(f"HTTP {status}: {message}", status=status, retry_after=hint)
    if status in (401, 403):
        # Never the server's message: OpenAI echoes part of a rejected key in it.
        reason = "rejected the API key" if status == 401 else "refused this API key access"
        return AuthenticationError(
            f"{provider} {reason} (HTTP {status}): check {key_env}",
            provider=provider,
            status=status,
        )
    if status == 404:
        return ProviderError(
            f"{provider} does not serve model {model!r} (HTTP 404: {message}); check the model "
            "name, and the base URL if you set one",
            provider=provider,
            status=404,
        )
    if status == 400:
        return InvalidRequest(
            f"{provider} rejected the request (HTTP 400): {message}", provider=provider
        )
    return ProviderError(
        f"{provider} failed (HTTP {status}): {message}", provider=provider, status=status
    )


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]], *, policy: RetryPolicy, provider: str
) -> tuple[T, int]:
    """Run `attempt` until it succeeds or fails for good; returns (result, retries made).

    `attempt` raises `RetryableError` for what may be retried; anything else propagates as is.
    """
    retries = 0
    while True:
        try:
            return await attempt(), retries
        except RetryableError as exc:
            if retries >= policy.max_retries:
                raise ProviderError(
                    f"{provider} failed after {retries + 1} attempts: {exc}",
                    provider=provider,
                    status=exc.status,
                ) from exc
            if exc.retry_after is not None and exc.retry_after > policy.max_retry_after:
                raise ProviderError(
                    f"{provider} asked to retry after {exc.retry_after:.0f} s, longer than the "
                    f"{policy.max_retry_after:.0f} s this policy waits: {exc}",
                    provider=provider,
                    status=exc.status,
                ) from exc
            wait = policy.delay(retries, exc.retry_after)
            log.warning(
                "%s: %s; retry %d of %d in %.2f s",
                provider,
                exc,
                retries + 1,
                policy.max_retries,
                wait,
            )
            await policy.sleep(wait)
            retries += 1


def sdk_arguments(create: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` as keyword arguments of an SDK method; fields it does not name go in
    `extra_body`, so a field the SDK does not know yet is still sent as rendered."""
    known = set(inspect.signature(create).parameters) - {"extra_body", "extra_headers"}
    kwargs = {k: v for k, v in payload.items() if k in known}
    extra = {k: v for k, v in payload.items() if k not in known}
    return {**kwargs, "extra_body": extra} if extra else kwargs


def error_message(body: object, fallback: str) -> str:
    """The provider's own explanation from an error body, whatever its shape."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    if isinstance(body, str) and body:
        return body[:300]
    return fallback


def broken_stream(provider: str, exc: Exception | None) -> ProviderError:
    """A stream that failed after text reached the caller: a retry would repeat that text."""
    why = f": {exc}" if exc is not None else " before its last event"
    return ProviderError(
        f"{provider} stream broke after text was delivered{why}; not retried, so no text repeats",
        provider=provider,
    )


class Accumulator(Protocol):
    """A dialect's stream accumulator (`stoker.wire.dialects.*_stream.Accumulator`)."""

    @property
    def done(self) -> bool: ...

    def feed_frame(self, data: str) -> str | None: ...

    def body(self) -> dict[str, Any]: ...


async def read_stream(
    opened: AbstractAsyncContextManager[Any],
    accumulator: Accumulator,
    *,
    on_text: Callable[[str], object] | None,
    provider: str,
) -> dict[str, Any]:
    """The response body of an SDK streaming response (`with_streaming_response.create`),
    read from its raw SSE lines; each text delta goes to `on_text` as it arrives."""
    decoder = Decoder()
    emitted = False
    try:
        async with opened as response:
            async for line in response.iter_lines():
                frame = decoder.feed(line)
                text = accumulator.feed_frame(frame[1]) if frame is not None else None
                if text and on_text is not None:
                    on_text(text)
                    emitted = True
        if (last := decoder.flush()) is not None:
            accumulator.feed_frame(last[1])
    except (httpx2.TransportError, ProviderError) as exc:
        status = exc.status if isinstance(exc, ProviderError) else None
        if emitted:
            raise broken_stream(provider, exc) from exc
        if isinstance(exc, ProviderError) and status not in RETRYABLE_STATUS:
            raise
        raise RetryableError(f"the stream broke: {exc}", status=status) from exc
    if not accumulator.done:
        if emitted:
            raise broken_stream(provider, None)
        raise RetryableError("the stream ended before its last event")
    return accumulator.body()
