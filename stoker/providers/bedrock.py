"""Claude on Amazon Bedrock, through the Converse API of the AWS SDK (`aiobotocore`,
`pip install 'stoker[bedrock]'`).

The payload is `stoker.wire.dialects.bedrock.render_request(request)`: the keyword
arguments of `client.converse(...)` (or `converse_stream(...)` when streaming), parsed
back by the same dialect. The SDK signs every request (SigV4) with the credentials it is
given, here and nowhere else: they are never logged, shown by `repr` or put in an error.
Its retries are off (`total_max_attempts=1`): `stoker.providers.retry` is the one policy.

Because requests are signed, `stoker proxy` can audit Bedrock's traffic but never
rewrite it (a changed body no longer matches its signature); `stoker sim serve` accepts
any signature and keys its caches by the access key id (docs/provider-caching.md,
"Bedrock").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any, Unpack

from stoker.cache.models import ModelInfo, fallback_info, with_prices
from stoker.errors import ConfigError, ProviderError, ProviderTimeout
from stoker.providers._adapter import AdapterOptions, SdkAdapter
from stoker.providers.base import CallContext, Completion
from stoker.providers.retry import (
    RetryableError,
    broken_stream,
    failure,
    relay,
)
from stoker.wire.dialects import bedrock as dialect
from stoker.wire.dialects import bedrock_stream
from stoker.wire.messages import AssistantMessage
from stoker.wire.request import Request
from stoker.wire.usage import Usage

NAME = "bedrock"
KEY_ENV = "AWS_ACCESS_KEY_ID"
_SDK_LOGGERS = ("botocore", "aiobotocore")


class _Redacted(logging.Filter):
    """Takes the credentials out of the AWS SDK's own log lines: at DEBUG it logs every
    request's headers (the session token) and what it signs."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(secret in text for secret in self.secrets):
            for secret in self.secrets:
                text = text.replace(secret, "***")
            record.msg, record.args = text, ()
        return True


def _redact_sdk_logs(secrets: tuple[str, ...]) -> None:
    """Put a `_Redacted` filter on every logger of the SDK (a logger's filters do not
    apply to its children, so each one gets its own)."""
    if not secrets:
        return
    names = [n for n in logging.Logger.manager.loggerDict if n.split(".")[0] in _SDK_LOGGERS]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Redacted) and f.secrets == secrets for f in logger.filters):
            logger.addFilter(_Redacted(secrets))


class BedrockProvider(SdkAdapter):
    """Claude models on Bedrock (or any server that speaks its Converse API)."""

    NAME = NAME
    KEY_ENV = KEY_ENV

    def __init__(
        self,
        *,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        profile: str | None = None,
        **options: Unpack[AdapterOptions],
    ) -> None:
        """Without credentials (or a region) the AWS SDK finds its own, as a boto3 client
        does: AWS_ACCESS_KEY_ID / AWS_PROFILE / ~/.aws / an instance role (AWS_REGION)."""
        if bool(access_key_id) != bool(secret_access_key):
            raise ConfigError(
                "the bedrock provider needs both an access key id and its secret access key"
            )
        self.region = region
        self.profile = profile
        self._credentials = {
            "aws_access_key_id": access_key_id,
            "aws_secret_access_key": secret_access_key,
            "aws_session_token": session_token,
        }
        self._client: Any = None
        self._context: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        super().__init__(**options)

    def __repr__(self) -> str:
        return f"BedrockProvider(region={self.region!r}, base_url={self.base_url!r})"

    def model_info(self, model: str) -> ModelInfo:
        """Known Bedrock ids (and their inference profiles) from the table; another id
        gets Bedrock's usual facts (a 1,024-token minimum, 5-minute entries)."""
        info = fallback_info(model, "bedrock")
        if info.provider != "bedrock":  # a Claude API name: Bedrock's rules still apply
            info = replace(fallback_info("", "bedrock"), name=model)
        return with_prices(info, self.prices, model)

    async def _sdk(self) -> Any:
        """The SDK client of the running event loop (a connection pool cannot cross loops)."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop:
            return self._client
        try:
            from aiobotocore.config import AioConfig
            from aiobotocore.session import AioSession
        except ImportError as exc:
            raise ConfigError(
                "the bedrock provider needs the AWS SDK: pip install 'stoker[bedrock]'"
            ) from exc
        timeouts = self.retry.timeouts
        config = AioConfig(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=timeouts.connect,
            read_timeout=timeouts.total,
        )
        session = AioSession(profile=self.profile)
        credentials = {k: v for k, v in self._credentials.items() if v}
        context = session.create_client(
            "bedrock-runtime",
            region_name=self.region,  # None: the AWS SDK's own (AWS_DEFAULT_REGION, profile)
            endpoint_url=self.base_url,
            config=config,
            **credentials,
        )
        try:
            self._client = await context.__aenter__()
        except Exception as exc:  # botocore's errors share no base we can import eagerly
            if type(exc).__name__ == "NoRegionError":
                raise ConfigError(
                    "the bedrock provider has no region: set AWS_DEFAULT_REGION (the AWS "
                    "SDK reads it), or pass one (region=..., or a Config that holds it)"
                ) from None
            raise
        self._context = context
        self._loop = loop
        _redact_sdk_logs(tuple(v for v in self._credentials.values() if v))
        return self._client

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        if self._context is not None:
            context, self._context, self._client = self._context, None, None
            await context.__aexit__(None, None, None)

    async def complete(self, request: Request, context: CallContext) -> Completion:
        stream = request.stream or context.streams
        payload = dialect.render_request(request)
        model = request.prefix.params.model

        async def attempt() -> tuple[AssistantMessage, Usage]:
            client = await self._sdk()
            try:
                if not stream:
                    body = await client.converse(**payload)
                    return dialect.parse_response(body)
                return await self._streamed(client, payload, context)
            except Exception as exc:  # botocore's errors share no base we can import eagerly
                raise self._mapped(exc, model) from (None if _auth(exc) else exc)

        (message, usage), started, retries = await self._attempts(attempt)
        return Completion(message=message, usage=usage, started_at=started, retries=retries)

    async def _streamed(
        self, client: Any, payload: dict[str, Any], context: CallContext
    ) -> tuple[AssistantMessage, Usage]:
        accumulator = bedrock_stream.Accumulator()
        emitted = False
        response = await client.converse_stream(**payload)
        try:
            async with asyncio.timeout(self.retry.timeouts.first_byte) as waiting:
                async for event in response["stream"]:
                    waiting.reschedule(None)
                    text = accumulator.feed(event)
                    if relay(text, accumulator.thinking, context.on_text, context.on_thinking):
                        emitted = True
        except TimeoutError:
            raise RetryableError(
                "the stream did not start within "
                f"{self.retry.timeouts.first_byte:g} s (the first-byte timeout)",
                timed_out="first_byte",
            ) from None
        except ProviderError as exc:
            if emitted:
                raise broken_stream(NAME, exc) from exc
            raise
        return dialect.parse_response(accumulator.body())

    def _mapped(self, exc: Exception, model: str) -> Exception:
        """Stoker's error for an SDK exception (a `RetryableError` when a retry may help)."""
        if isinstance(exc, ProviderError | ConfigError):
            return exc
        error = getattr(exc, "response", None)
        if isinstance(error, dict) and "Error" in error:
            status = int((error.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 500)
            code = str(error["Error"].get("Code") or "")
            message = f"{code}: {error['Error'].get('Message') or ''}".strip(": ")
            if code in ("ThrottlingException", "ServiceUnavailableException"):
                status = 429 if code == "ThrottlingException" else 503
            headers = (error.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
            return failure(
                NAME, status, message, headers=headers, model=model, key_env=self.key_env
            )
        kind = type(exc).__name__
        if kind in ("ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError"):
            region = self.region or "the AWS SDK's region"
            where = self.base_url or f"Bedrock in {region}"
            return RetryableError(f"could not reach {where}: {kind}", timed_out=None)
        if kind == "ReadTimeoutError":
            return ProviderTimeout(
                f"{NAME} did not answer within {self.retry.timeouts.total:g} s",
                provider=NAME,
                phase="total",
            )
        if kind in ("NoCredentialsError", "PartialCredentialsError", "ProfileNotFound"):
            return ConfigError(
                f"the bedrock provider has no usable credentials ({kind}): set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (the AWS SDK "
                "reads them)"
            )
        return ProviderError(f"{NAME} call failed: {kind}", provider=NAME)


def _auth(exc: Exception) -> bool:
    """Whether an SDK error is about the credentials (never chained: it may quote them)."""
    error = getattr(exc, "response", None)
    status = (
        (error or {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(error, dict)
        else None
    )
    return status in (401, 403)
