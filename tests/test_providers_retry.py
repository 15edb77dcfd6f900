"""The one retry policy: what is retried, how long it waits, and what fails at once."""

from __future__ import annotations

import logging

import pytest

from stoker.errors import AuthenticationError, InvalidRequest, ProviderError, ProviderTimeout
from stoker.providers.retry import (
    RetryableError,
    RetryPolicy,
    Timeouts,
    call_with_retries,
    failure,
    retry_after_seconds,
    sdk_arguments,
)


class Sleeps:
    """An injectable sleep that records instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=lambda: 1.0)
    assert [policy.delay(n, None) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert RetryPolicy(jitter=lambda: 0.25).delay(2, None) == 0.5
    assert policy.delay(0, 7.0) == 7.0  # the server's hint is obeyed as given


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "2", "retry-after-ms": "250"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2026 07:28:10 GMT"}, 10.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    now = 1792567680.0  # 2026-10-21 07:28:00 UTC
    assert retry_after_seconds(headers, now=now) == expected


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
def test_overload_rate_limits_and_server_errors_are_retried(status: int) -> None:
    found = failure(
        "anthropic", status, "busy", headers={"retry-after": "1"}, model="m", key_env="K"
    )
    assert isinstance(found, RetryableError)
    assert (found.status, found.retry_after) == (status, 1.0)


def test_client_errors_fail_at_once_with_what_to_fix() -> None:
    args = {"headers": {}, "model": "claude-x", "key_env": "ANTHROPIC_API_KEY"}
    bad = failure("anthropic", 400, "messages.0: bad", **args)
    assert isinstance(bad, InvalidRequest)
    assert str(bad) == "anthropic rejected the request (HTTP 400): messages.0: bad"
    for status in (401, 403):
        auth = failure("anthropic", status, "Incorrect API key provided: sk-ab***yz", **args)
        assert isinstance(auth, AuthenticationError)
        assert "check ANTHROPIC_API_KEY" in str(auth)
        assert "sk-ab" not in str(auth)  # the server's echo of the key is never repeated
    missing = failure("anthropic", 404, "model not found", **args)
    assert type(missing) is ProviderError
    assert "'claude-x'" in str(missing)
    assert missing.status == 404


async def test_retries_until_success_and_counts_them() -> None:
    sleeps = Sleeps()
    attempts = iter(
        [RetryableError("529", status=529), RetryableError("429", retry_after=2.0), "ok"]
    )

    async def attempt() -> str:
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    policy = RetryPolicy(sleep=sleeps, jitter=lambda: 0.5)
    assert await call_with_retries(attempt, policy=policy, provider="p") == ("ok", 2)
    assert sleeps.waits == [0.25, 2.0]


async def test_gives_up_after_max_retries_naming_the_attempts() -> None:
    sleeps = Sleeps()

    async def attempt() -> str:
        raise RetryableError("HTTP 529: overloaded", status=529)

    with pytest.raises(ProviderError) as caught:
        await call_with_retries(
            attempt, policy=RetryPolicy(max_retries=2, sleep=sleeps), provider="p"
        )
    assert str(caught.value) == "p failed after 3 attempts: HTTP 529: overloaded"
    assert caught.value.status == 529
    assert len(sleeps.waits) == 2


async def test_a_retry_after_longer_than_the_policy_allows_fails_at_once() -> None:
    sleeps = Sleeps()

    async def attempt() -> str:
        raise RetryableError("HTTP 429", status=429, retry_after=600.0)

    with pytest.raises(ProviderError, match="asked to retry after 600 s"):
        await call_with_retries(attempt, policy=RetryPolicy(sleep=sleeps), provider="p")
    assert sleeps.waits == []


async def test_other_errors_are_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    sleeps = Sleeps()
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        raise InvalidRequest("no")

    with pytest.raises(InvalidRequest):
        await call_with_retries(attempt, policy=RetryPolicy(sleep=sleeps), provider="p")
    assert (calls, sleeps.waits, caplog.records) == (1, [], [])


async def test_each_retry_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    attempts = iter([RetryableError("HTTP 503: down", status=503), "ok"])

    async def attempt() -> str:
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with caplog.at_level(logging.WARNING, logger="stoker.providers.retry"):
        await call_with_retries(
            attempt, policy=RetryPolicy(sleep=Sleeps(), jitter=lambda: 0.0), provider="openai"
        )
    assert [r.getMessage() for r in caplog.records] == [
        "openai: HTTP 503: down; retry 1 of 4 in 0.00 s"
    ]


def test_fields_an_sdk_method_does_not_name_go_in_extra_body() -> None:
    def create(*, model: str, messages: list[str], extra_body: object = None) -> None: ...

    payload = {"model": "m", "messages": [], "prompt_cache_breakpoints": 2}
    assert sdk_arguments(create, payload) == {
        "model": "m",
        "messages": [],
        "extra_body": {"prompt_cache_breakpoints": 2},
    }
    assert sdk_arguments(create, {"model": "m"}) == {"model": "m"}


async def test_a_timeout_that_keeps_happening_ends_as_a_provider_timeout() -> None:
    async def attempt() -> str:
        raise RetryableError("the stream did not start within 1 s", timed_out="first_byte")

    policy = RetryPolicy(max_retries=1, sleep=Sleeps())
    with pytest.raises(ProviderTimeout) as caught:
        await call_with_retries(attempt, policy=policy, provider="p")
    assert caught.value.phase == "first_byte"
    assert str(caught.value) == "p failed after 2 attempts: the stream did not start within 1 s"


async def test_the_total_timeout_bounds_the_retries_and_their_waits() -> None:
    attempts = 0

    async def attempt() -> str:
        nonlocal attempts
        attempts += 1
        raise RetryableError("HTTP 529: overloaded", status=529)

    # Real waits of 0.05 s and more; the deadline comes long before the 100 retries do.
    policy = RetryPolicy(max_retries=100, base_delay=0.05, timeouts=Timeouts(total=0.3))
    with pytest.raises(ProviderTimeout) as caught:
        await call_with_retries(attempt, policy=policy, provider="p")
    assert caught.value.phase == "total"
    assert str(caught.value).startswith("p did not answer within 0.3 s (the total timeout")
    assert 1 <= attempts < 100
