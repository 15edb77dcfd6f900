"""What every SDK adapter (Anthropic, OpenAI, Gemini, Bedrock) keeps besides its client,
built one way so a new adapter cannot forget the retry policy, the clock or the prices.

`_start` is where an adapter builds its client, and finds its key when none was passed:
the SDKs read their environment variables when a client is built, so that is when a
missing key can be named, before the first call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar, TypedDict, TypeVar

from stoker.cache.prices import PriceBook
from stoker.clock import Clock, SystemClock
from stoker.lifecycle import AsyncClosing
from stoker.providers.retry import RetryPolicy, call_with_retries

T = TypeVar("T")


class AdapterOptions(TypedDict, total=False):
    """What every adapter takes besides its key and its own settings: where calls go
    (`base_url`, None: the SDK's own), how they are retried and timed, the variable named
    when the key is refused (None: the adapter's `KEY_ENV`), and the user's prices. An
    adapter with settings of its own passes these on as they came; `SdkAdapter` names
    their defaults and refuses a keyword it does not know, so a misspelt option fails at
    once rather than being dropped."""

    base_url: str | None
    retry: RetryPolicy | None
    clock: Clock | None
    key_env: str | None
    prices: PriceBook | None


class SdkAdapter(AsyncClosing):
    """An adapter's `AdapterOptions`, named once and resolved to their defaults."""

    NAME: ClassVar[str]
    KEY_ENV: ClassVar[str]

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        key_env: str | None = None,
        prices: PriceBook | None = None,
    ) -> None:
        self._api_key = api_key or None
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self.clock: Clock = clock or SystemClock()
        self.key_env = key_env or self.KEY_ENV
        self.prices = prices
        self._start()

    def _start(self) -> None:
        """Build what the adapter needs before its first call (nothing, by default)."""

    @property
    def name(self) -> str:
        return self.NAME

    async def _attempts(self, attempt: Callable[[], Awaitable[T]]) -> tuple[T, float, int]:
        """`attempt` under the retry policy: its result, when the attempt that gave it
        started (what the record times from), and the retries made."""
        started = 0.0

        async def timed() -> T:
            nonlocal started
            started = self.clock.now()
            return await attempt()

        result, retries = await call_with_retries(timed, policy=self.retry, provider=self.name)
        return result, started, retries

    async def aclose(self) -> None:
        """Close the HTTP connections (call it when the provider is no longer needed)."""
