"""What every SDK-backed provider shares: one retry policy with its timeouts, failures
mapped to errors, and the rule for a stream that breaks.

The SDKs' own retries are switched off (`max_retries=0`) so this is the only policy:
it counts the retries it made (the cache record shows them), sleeps through an
injectable function (tests do not wait), and honours the server's `retry-after-ms` /
`retry-after` headers. Overload, rate limits, server errors, lost connections, a
malformed answer (a 200 that is not a response of the API: HTML, empty, the wrong JSON)
and a connect or first-byte timeout are retried with exponential backoff and full
jitter; a rejected request, key or model fails at once with an error that says what to
fix. A stream that breaks before any text reached the caller is retried like any
request; after that it is not, since a retry would hand the caller the same text twice.
`Timeouts.total` bounds the whole call, retries and their waits included.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx2

from stoker.errors import (
    AuthenticationError,
    ConfigError,
    InvalidRequest,
    ProviderError,
    ProviderTimeout,
    WireError,
)
from stoker.wire.dialects.sse import Decoder

log = logging.getLogger(__name__)

T = TypeVar("T")

# 408 is a timeout too; 529 is Anthropic's "overloaded".
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})


class RetryableError(ProviderError):
    """A failure worth retrying: overload, rate limit, server error, lost connection, a
    malformed answer, a connect or first-byte timeout. The retry loop turns the last one
    into a plain `ProviderError` when it gives up (a `ProviderTimeout` when `timed_out`
    names the timeout that fired)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        timed_out: str | None = None,
    ):
        super().__init__(message, status=status)
        self.retry_after = retry_after
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """How long a provider call may take, in seconds. Each is a setting because a slow
    upstream otherwise holds the session's lock for as long as it hangs.

    `connect` (10 s): opening the connection (TCP and TLS). A live host answers in well
    under a second; ten covers a slow network and a lost SYN, and past that the host is
    not there. Retried: nothing reached the model.

    `first_byte` (120 s): a streamed call's wait for its first event. Providers send it
    once the prompt is read, seconds even for a long prompt on a busy server; two minutes
    of silence is a stuck call, not a slow one. Retried. A non-streamed call sends its
    first byte only when the whole answer is ready, so only `total` bounds it.

    `total` (600 s): the whole call, retries and their waits included, so it is the
    longest one model call holds its session. Ten minutes is the SDKs' own default and
    the longest answer Anthropic serves without streaming; at usual output speeds it
    covers answers of 30,000+ tokens. Raise it for longer answers. Never retried.
    """

    connect: float = 10.0
    first_byte: float = 120.0
    total: float = 600.0

    def __post_init__(self) -> None:
        if min(self.connect, self.first_byte, self.total) <= 0:
            raise ConfigError(f"timeouts must be more than 0 seconds, not {self}")

    def for_sdk(self) -> httpx2.Timeout:
        """The SDK client's timeout: `connect` for connecting and for a pooled connection;
        reads and writes are bounded by `total` here and by `first_byte` in `read_stream`."""
        return httpx2.Timeout(self.total, connect=self.connect, pool=self.connect)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to retry, and how long a call may take (`timeouts`).

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
    timeouts: Timeouts = field(default_factory=Timeouts)
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

    `attempt` raises `RetryableError` for what may be retried; anything else propagates as
    is. The whole loop runs within `policy.timeouts.total`.
    """
    total = policy.timeouts.total
    try:
        async with asyncio.timeout(total) as deadline:
            return await _retrying(attempt, policy=policy, provider=provider)
    except TimeoutError:
        if not deadline.expired():
            raise
        raise ProviderTimeout(
            f"{provider} did not answer within {total:g} s (the total timeout, retries "
            "included); no answer was stored, and the session takes the next message. If "
            "answers this long are expected, raise Timeouts.total (total_seconds in the "
            "gateway's [timeouts])",
            provider=provider,
            phase="total",
        ) from None


async def _retrying(
    attempt: Callable[[], Awaitable[T]], *, policy: RetryPolicy, provider: str
) -> tuple[T, int]:
    retries = 0
    while True:
        try:
            return await attempt(), retries
        except RetryableError as exc:
            if retries >= policy.max_retries:
                message = f"{provider} failed after {retries + 1} attempts: {exc}"
                if exc.timed_out is not None:
                    timeout = ProviderTimeout(message, provider=provider, phase=exc.timed_out)
                    timeout.attempts = retries + 1
                    raise timeout from exc
                raise ProviderError(
                    message, provider=provider, status=exc.status, attempts=retries + 1
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


def broken_stream(provider: str, exc: Exception) -> ProviderError:
    """A stream that failed after text reached the caller: a retry would repeat that text."""
    return ProviderError(
        f"{provider} stream broke after text was delivered: {exc}; not retried, so no text repeats",
        provider=provider,
    )


class Accumulator(Protocol):
    """A dialect's stream accumulator (`stoker.wire.dialects.*_stream.Accumulator`)."""

    @property
    def done(self) -> bool: ...

    thinking: str | None  # the thinking delta of the frame just fed, if it was one

    def feed_frame(self, data: str) -> str | None: ...

    def body(self) -> dict[str, Any]: ...


def malformed_answer(exc: Exception, *, content_type: str, seen: str) -> RetryableError:
    """A 200 that is not an answer of the API (HTML from a proxy, an empty body, another
    API's JSON, a stream of garbage): the provider's fault, retried as a 5xx would be.
    `seen` describes what came (it may quote the upstream's text, never ours)."""
    kind = content_type.split(";")[0].strip() or "no content type"
    return RetryableError(f"a malformed answer ({kind}, {seen}): {exc}")


def parse_body(data: bytes, content_type: str, parse: Callable[[Any], T]) -> T:
    """`parse` of the JSON in `data`; a `RetryableError` when it is not JSON or not an answer."""
    try:
        return parse(json.loads(data))
    except (ValueError, WireError) as exc:  # json.JSONDecodeError is a ValueError
        head = data[:120].decode("utf-8", "replace")
        seen = f"{len(data)} bytes: {head!r}" if data else "an empty body"
        raise malformed_answer(exc, content_type=content_type, seen=seen) from exc


def relay(
    text: str | None,
    thinking: str | None,
    on_text: Callable[[str], object] | None,
    on_thinking: Callable[[str], object] | None,
) -> bool:
    """Hand what one streamed chunk said to the caller; whether anything went out, after
    which a broken stream is not retried (the caller would see its text twice)."""
    emitted = False
    if text and on_text is not None:
        on_text(text)
        emitted = True
    if thinking and on_thinking is not None:
        on_thinking(thinking)
        emitted = True
    return emitted


async def read_stream(
    opened: AbstractAsyncContextManager[Any],
    accumulator: Accumulator,
    *,
    parse: Callable[[dict[str, Any]], T],
    on_text: Callable[[str], object] | None,
    provider: str,
    first_byte: float,
    on_thinking: Callable[[str], object] | None = None,
) -> T:
    """`parse` of the response body of an SDK streaming response
    (`with_streaming_response.create`), read from its raw SSE lines; each text delta goes
    to `on_text` as it arrives, each thinking delta to `on_thinking`. No line within
    `first_byte` seconds is a retryable timeout."""
    decoder = Decoder()
    emitted = False
    lines = 0
    content_type = ""
    try:
        async with asyncio.timeout(first_byte) as waiting:
            async with opened as response:
                content_type = response.headers.get("content-type", "")
                async for line in response.iter_lines():
                    if not lines:
                        waiting.reschedule(None)  # it started; only `total` bounds it now
                    lines += 1
                    frame = decoder.feed(line)
                    text = accumulator.feed_frame(frame[1]) if frame is not None else None
                    if relay(text, accumulator.thinking, on_text, on_thinking):
                        emitted = True
        if (last := decoder.flush()) is not None:
            accumulator.feed_frame(last[1])
        if not accumulator.done:
            raise WireError(f"the stream ended before its last event ({lines} lines read)")
        return parse(accumulator.body())
    except TimeoutError:
        if not waiting.expired():
            raise
        raise RetryableError(
            f"the stream did not start within {first_byte:g} s (the first-byte timeout)",
            timed_out="first_byte",
        ) from None
    except (httpx2.TransportError, ProviderError, WireError) as exc:
        status = exc.status if isinstance(exc, ProviderError) else None
        if emitted:
            raise broken_stream(provider, exc) from exc
        if isinstance(exc, ProviderError) and status not in RETRYABLE_STATUS:
            raise
        if isinstance(exc, WireError):
            seen = f"a stream of {lines} lines"
            raise malformed_answer(exc, content_type=content_type, seen=seen) from exc
        raise RetryableError(f"the stream broke: {exc}", status=status) from exc
