"""Gemini on the Gemini API over Google's official `google-genai` SDK (the `google`
extra), and its explicit cache objects (`cachedContents`).

The payload is `stoker.wire.dialects.gemini.render_request(request)`; this adapter maps
it onto the SDK's values (`Content`, `GenerateContentConfig`, read from the wire JSON, so
a thought signature or an image's bytes arrive as the base64 the dialect wrote) and maps
the answer back to wire JSON for the dialect to parse: the raw body when not streamed,
each chunk dumped by its wire names when streamed. The SDK brings auth, the URL and the
connection; its retries are off (`stoker.providers.retry` is the only policy) and its
HTTP client is Stoker's own `httpx2` client, so timeouts and transport errors are the
other adapters'. The key reaches the SDK only: never a log, a record or an error
message, whatever the server answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import httpx2

from stoker.cache.models import ModelInfo, fallback_info, with_prices
from stoker.errors import (
    AuthenticationError,
    ConfigError,
    ProviderError,
    ProviderTimeout,
    WireError,
)
from stoker.providers._adapter import SdkAdapter
from stoker.providers.base import CallContext, Completion
from stoker.providers.caches import CacheCall, owned
from stoker.providers.retry import RetryableError, failure, relay
from stoker.wire.dialects import gemini as dialect
from stoker.wire.dialects import gemini_caches as caches
from stoker.wire.dialects import gemini_stream
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "google"
KEY_ENV = "GOOGLE_API_KEY"
API_VERSION = "v1beta"  # cachedContents live here
_CONFIG_KEYS = ("systemInstruction", "tools", "toolConfig", "cachedContent")


@dataclass(slots=True)
class _Clients:
    """The SDK client for one event loop, over Stoker's own HTTP client."""

    genai: Any
    http: httpx2.AsyncClient

    async def close(self) -> None:
        await self.genai.aclose()
        await self.http.aclose()


class GoogleProvider(SdkAdapter):
    """Gemini models through the Gemini API (or any server that speaks it, such as
    `stoker sim serve`)."""

    NAME = NAME
    KEY_ENV = KEY_ENV

    def _start(self) -> None:
        """Without `api_key` the SDK finds its own, as `genai.Client()` does:
        GOOGLE_API_KEY or GEMINI_API_KEY."""
        from google import genai  # the `google` extra; it takes a second to import

        if self._api_key is None:
            try:
                genai.Client(vertexai=False)  # the SDK reads its variables when it is built
            except ValueError:
                raise ConfigError(
                    f"the google provider has no API key: set {KEY_ENV} or GEMINI_API_KEY "
                    "(the google-genai SDK reads them), or pass one (api_key=..., or a "
                    "Config that holds it)"
                ) from None
        self._genai = genai
        self.made: set[str] = set()  # explicit caches this provider object created
        self._clients: _Clients | None = None
        self._loop: object = None

    def __repr__(self) -> str:
        return f"GoogleProvider(base_url={self.base_url!r})"

    @property
    def cache_account(self) -> str:
        """Where its explicit caches live, as a digest of the server and key (never the
        key): sessions of an agent on the same key share a cache of their tools and system
        prompt (`stoker.cache.fleet_cache`). A key the SDK finds itself counts as one."""
        seen = f"{self.base_url or ''}\0{self._api_key or '(from the environment)'}"
        return hashlib.sha256(seen.encode()).hexdigest()[:16]

    def model_info(self, model: str) -> ModelInfo:
        """Known models from the table; a new one gets Gemini's usual facts. Priced by the
        user's overrides, else the catalogue."""
        return with_prices(fallback_info(model, "google"), self.prices, model)

    # -- the SDK client ------------------------------------------------------------------

    def _client(self) -> Any:
        """`client.aio` for the running event loop: a connection pool cannot cross loops,
        so a new loop gets a new client (as `stoker.providers._sdk.LoopBoundClient`)."""
        loop = asyncio.get_running_loop()
        found = self._clients
        if found is None or self._loop is not loop:
            types = self._genai.types
            http = httpx2.AsyncClient(timeout=self.retry.timeouts.for_sdk())
            options = types.HttpOptions(
                base_url=self.base_url,
                api_version=API_VERSION,
                # One timeout per request in this SDK: the whole call's.
                timeout=int(self.retry.timeouts.total * 1000),
                httpx_async_client=http,
            )
            client = self._genai.Client(api_key=self._api_key, vertexai=False, http_options=options)
            found = self._clients = _Clients(genai=client.aio, http=http)
            self._loop = loop
        return found.genai

    async def aclose(self) -> None:
        """Close the HTTP connections (call it when the provider is no longer needed)."""
        clients, self._clients = self._clients, None
        if clients is not None:
            await clients.close()

    # -- generateContent -------------------------------------------------------------------

    def _arguments(self, payload: dict[str, Any], *, raw: bool) -> dict[str, Any]:
        """The wire payload as the SDK's keyword arguments, read from JSON so every value
        arrives as the wire has it (base64 bytes included)."""
        types = self._genai.types
        body = dict(payload)
        model = body.pop("model")
        body.pop("stream", None)
        wire = {**{k: body[k] for k in _CONFIG_KEYS if k in body}, **body["generationConfig"]}
        config = types.GenerateContentConfig.model_validate_json(json.dumps(wire))
        config.automatic_function_calling = types.AutomaticFunctionCallingConfig(disable=True)
        config.automatic_continuation = False
        if raw:
            config.should_return_http_response = True
        contents = [types.Content.model_validate_json(json.dumps(c)) for c in body["contents"]]
        return {"model": model, "contents": contents, "config": config}

    async def complete(self, request: Request, context: CallContext) -> Completion:
        stream = request.stream or context.streams
        payload = dialect.render_request(request)
        model = request.prefix.params.model

        async def attempt() -> tuple[AssistantMessage, Usage]:
            models = self._client().models
            if stream:
                body = await self._streamed(models, payload, model, context)
            else:
                kwargs = self._arguments(payload, raw=True)
                response = await self._call(models.generate_content(**kwargs), model)
                body = _body(response.sdk_http_response.body)
            try:  # parsed inside the attempt: an answer that is no answer is retried
                return dialect.parse_response(body)
            except WireError as exc:
                raise RetryableError(f"a malformed answer: {exc}") from exc

        (message, usage), started, retries = await self._attempts(attempt)
        return Completion(message=message, usage=usage, started_at=started, retries=retries)

    async def _streamed(
        self, models: Any, payload: dict[str, Any], model: str, context: CallContext
    ) -> dict[str, Any]:
        chunks = await self._call(
            models.generate_content_stream(**self._arguments(payload, raw=False)), model
        )
        accumulator = gemini_stream.Accumulator()
        emitted = False
        try:
            async for chunk in chunks:
                wire = chunk.model_dump(
                    mode="json",
                    by_alias=True,
                    exclude_none=True,
                    exclude={"sdk_http_response", "automatic_function_calling_history", "parsed"},
                )
                text = accumulator.feed(wire)
                if relay(text, accumulator.thinking, context.on_text, context.on_thinking):
                    emitted = True
        except Exception as exc:
            if isinstance(exc, self._genai.errors.APIError):
                mapped = self._mapped(exc, model)
            elif isinstance(exc, ProviderError):
                mapped = exc
            else:
                mapped = _transport(exc)
            if emitted:
                raise ProviderError(
                    f"{NAME} stream broke after text was delivered: {exc}; not retried, so "
                    "no text repeats",
                    provider=NAME,
                ) from exc
            raise mapped from (None if isinstance(mapped, AuthenticationError) else exc)
        return accumulator.body()

    async def _call(self, awaitable: Any, model: str) -> Any:
        """`awaitable` (an SDK call), its failures as Stoker's errors."""
        errors = self._genai.errors
        try:
            return await awaitable
        except errors.APIError as exc:
            raise self._mapped(exc, model) from None  # the server's text may name the key
        except (httpx2.TransportError, OSError) as exc:
            raise _transport(exc) from exc

    def _mapped(self, exc: Any, model: str) -> Exception:
        code = int(getattr(exc, "code", 0) or 0)
        message = str(getattr(exc, "message", "") or getattr(exc, "status", "") or "")
        details = json.dumps(getattr(exc, "details", None) or {}, default=str)
        if code == 400 and ("API_KEY_INVALID" in details or "API key not valid" in message):
            # Gemini answers a bad key with a 400; never its text
            return AuthenticationError(
                f"{NAME} rejected the API key (HTTP 400): check {self.key_env}",
                provider=NAME,
                status=400,
            )
        if "CachedContent" in message and code in (403, 404):
            return ProviderError(
                f"{NAME}: an explicit cache this request named is gone ({message})",
                provider=NAME,
                status=404,
            )
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        return failure(NAME, code, message, headers=headers, model=model, key_env=self.key_env)

    # -- explicit cache objects (stoker.providers.caches) ------------------------------------

    async def _cache_call(self, make: Any, *, model: str = "") -> tuple[Any, float, int]:
        async def attempt() -> Any:
            return await self._call(make(self._client().caches), model)

        return await self._attempts(attempt)

    def _info(self, cached: Any) -> caches.CacheInfo:
        return caches.parse_cache(cached.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def create_cache(self, request: Request, *, ttl: float, label: str) -> CacheCall:
        payload = caches.render_create(request, ttl=ttl, display_name=label)
        model = payload.pop("model")
        types = self._genai.types
        config = types.CreateCachedContentConfig.model_validate_json(json.dumps(payload))
        result, started, retries = await self._cache_call(
            lambda c: c.create(model=model, config=config), model=model
        )
        info = self._info(result)
        self.made.add(info.name)
        return _called(info.name, info, started, retries)

    async def extend_cache(self, name: str, *, ttl: float) -> CacheCall:
        types = self._genai.types
        config = types.UpdateCachedContentConfig.model_validate(caches.render_update(ttl))
        result, started, retries = await self._cache_call(
            lambda c: c.update(name=name, config=config)
        )
        info = self._info(result)
        return _called(name, info, started, retries)

    async def delete_cache(self, name: str) -> CacheCall:
        found, _, _ = await self._cache_call(lambda c: c.get(name=name))
        info = self._info(found)
        _, started, retries = await self._cache_call(lambda c: c.delete(name=name))
        self.made.discard(name)
        return _called(name, info, started, retries)

    async def sweep_caches(self, scope: str, *, keep: Collection[str] = ()) -> list[str]:
        listed, _, _ = await self._cache_call(lambda c: c.list())
        gone = []
        async for cached in listed:
            name, label = str(cached.name or ""), str(cached.display_name or "")
            if owned(label, scope) and name not in keep and name not in self.made:
                await self._cache_call(lambda c, name=name: c.delete(name=name))
                gone.append(name)
        return gone


def _called(name: str, info: caches.CacheInfo, started: float, retries: int) -> CacheCall:
    return CacheCall(
        name=name,
        tokens=info.tokens,
        expires_at=info.expires_at,
        started_at=started,
        retries=retries,
    )


def _body(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except ValueError as exc:
        seen = f"{len(text or '')} bytes: {(text or '')[:120]!r}" if text else "an empty body"
        raise RetryableError(f"a malformed answer ({seen}): {exc}") from exc


def _transport(exc: Exception) -> Exception:
    """A transport failure: retried, or a timeout when the whole call ran out."""
    if isinstance(exc, httpx2.ConnectTimeout | httpx2.PoolTimeout | httpx2.ConnectError):
        return RetryableError(f"could not connect to the Gemini API: {exc}", timed_out=None)
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderTimeout(
            f"{NAME} did not answer in time: {exc}", provider=NAME, phase="total"
        )
    return RetryableError(f"could not reach the Gemini API: {exc!r}")
