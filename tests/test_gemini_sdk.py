"""Gemini end to end: the README's library example on `google:` through google-genai
against `stoker sim serve` (Gemini's wire, over loopback HTTP), and the same on the
in-process simulator; explicit caches through the SDK; and keys that reach no log,
record or error message."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlparse

import httpx
import pytest

from stoker import Agent, Config
from stoker.errors import AuthenticationError
from stoker.providers.base import CallContext
from stoker.providers.google import GoogleProvider
from stoker.providers.retry import RetryPolicy
from stoker.providers.sim._http import workspace_of
from stoker.providers.sim.server import ServedSim, create_app, serve_in_background
from stoker.tools import DispatchPolicy
from stoker.wire.messages import user_text
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.request import CacheObject, Request
from tests.provider_rigs import SYSTEM, word_count  # SYSTEM: above Gemini's 1,024-token minimum

KEY = "AIza-test-key-never-shown-0123456789"
MODEL = "gemini-2.5-flash"


@pytest.fixture(scope="module")
def server() -> Iterator[ServedSim]:
    with serve_in_background(create_app()) as running:
        yield running


@pytest.fixture
def served(server: ServedSim) -> str:
    return server.url


def _agent(transport: str, url: str, key: str = KEY) -> Agent:
    if transport == "inprocess":
        return Agent(f"sim:{MODEL}", tools=[word_count], system=SYSTEM, keep_warm=False)
    config = Config.from_env({}, google_api_key=key, google_base_url=url)
    return Agent(
        f"google:{MODEL}", tools=[word_count], system=SYSTEM, config=config, keep_warm=False
    )


@pytest.fixture(params=["http", "inprocess"])
async def either(request: pytest.FixtureRequest, served: str) -> AsyncIterator[Agent]:
    """An agent over loopback HTTP or in process, with a workspace of its own."""
    key = f"{KEY}-{request.param}-{request.function.__name__}"
    async with _agent(request.param, served, key=key) as agent:
        yield agent


async def test_the_readme_example_reads_the_cache_on_its_second_turn(either: Agent) -> None:
    session = either.session()
    result = await session.send("word count of 'one two three'")
    assert "3" in result.text
    calls = [c for m in session.history for c in getattr(m, "tool_calls", ())]
    assert [json.loads(c.input_json) for c in calls] == [{"text": "one two three"}]
    second = await session.send("Thanks. Anything else?")
    assert second.records[0].usage.read >= result.records[-1].usage.input_total
    review = session.fork(policy=DispatchPolicy(allowed=frozenset()))
    answer = await review.send("Anything worth remembering?")
    assert answer.records[0].usage.read >= second.records[-1].usage.input_total
    assert answer.records[0].explanation.verdict == "hit"


async def test_a_streamed_turn_delivers_text_and_reads_the_cache(either: Agent) -> None:
    session = either.session()
    await session.send("Hello there")
    pieces: list[str] = []
    async for event in session.stream("Tell me more, please"):
        text = getattr(event, "text", None)
        if type(event).__name__ == "TextDelta" and text:
            pieces.append(text)
    assert "".join(pieces) == session.history[-1].text
    assert session.records[-1].usage.read > 0


async def test_the_sdk_client_talks_to_the_loopback_server(server: ServedSim) -> None:
    key = f"{KEY}-loopback"
    agent = _agent("http", server.url, key=key)
    provider = agent.provider
    assert isinstance(provider, GoogleProvider)
    assert urlparse(provider.base_url or "").hostname == "127.0.0.1"
    async with agent:
        await agent.session().send("Hello")
        sdk = provider._client()  # noqa: SLF001 - the SDK client the provider made
        assert urlparse(sdk._api_client._http_options.base_url).hostname == "127.0.0.1"  # noqa: SLF001
    # the loopback server got the call, under this key's workspace (the key is not kept)
    (sent,) = server.app.state.sim.sent_by(key)
    assert sent["model"] == MODEL
    assert sent["systemInstruction"]["parts"][0]["text"].startswith(SYSTEM.strip())


async def test_keys_reach_no_log_record_or_error_message(
    served: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = f"{KEY}-secret"
    config = Config.from_env({}, google_api_key=secret, google_base_url=served)
    async with Agent(f"google:{MODEL}", system=SYSTEM, config=config, keep_warm=False) as agent:
        session = agent.session()
        await session.send("Hello")
        shown = [repr(config), repr(agent.provider), repr(agent)]
        shown += [json.dumps(r.to_dict()) for r in session.records]
    with serve_in_background(create_app(api_keys=["another-key"])) as strict:
        bad = Config.from_env({}, google_api_key=secret, google_base_url=strict.url)
        async with Agent(f"google:{MODEL}", system=SYSTEM, config=bad, keep_warm=False) as agent:
            with pytest.raises(AuthenticationError) as refused:
                await agent.session().send("Hello")
    shown += [str(refused.value), repr(refused.value), str(refused.value.__cause__)]
    assert "GOOGLE_API_KEY" in str(refused.value)
    assert all(secret not in text for text in shown)
    assert secret not in caplog.text


async def test_explicit_caches_through_the_sdk(served: str) -> None:
    key = f"{KEY}-explicit"
    provider = GoogleProvider(api_key=key, base_url=served)
    prefix = Prefix(params=CacheParams(model=MODEL), system=SYSTEM)
    held = (user_text("Here is the whole repository."),)
    async with provider:
        made = await provider.create_cache(
            Request(prefix=prefix, messages=held), ttl=600, label="stoker/agent/s1"
        )
        assert made.tokens > 1024
        assert made.expires_at == pytest.approx(made.started_at + 600, abs=1.0)
        longer = await provider.extend_cache(made.name, ttl=1200)
        assert longer.expires_at == pytest.approx(longer.started_at + 1200, abs=1.0)
        request = Request(
            prefix=prefix,
            messages=(*held, user_text("What is in it?")),
            cache_object=CacheObject(name=made.name, messages=1),
        )
        answer = await provider.complete(request, CallContext(session_id="s1"))
        assert answer.usage.read == made.tokens
        # what the request sent: the cache's name and the one message it does not hold
        assert await provider.sweep_caches("agent") == []  # this provider made it
        gone = await provider.delete_cache(made.name)
        assert gone.tokens == made.tokens


async def test_a_startup_sweep_deletes_what_a_dead_process_left(served: str) -> None:
    key = f"{KEY}-sweep"
    prefix = Prefix(params=CacheParams(model=MODEL), system=SYSTEM)
    request = Request(prefix=prefix, messages=(user_text("hello"),))
    async with GoogleProvider(api_key=key, base_url=served) as dead:
        left = await dead.create_cache(request, ttl=600, label="stoker/agent/old")
        other = await dead.create_cache(request, ttl=600, label="someone-else")
    async with GoogleProvider(api_key=key, base_url=served) as restarted:
        assert await restarted.sweep_caches("agent") == [left.name]
        assert await restarted.sweep_caches("agent") == []
        assert (await restarted.delete_cache(other.name)).name == other.name


def test_the_workspace_is_a_hash_of_the_key() -> None:
    assert KEY not in workspace_of(KEY)


async def test_overload_is_retried_by_stokers_policy_and_counted(server: ServedSim) -> None:
    async def no_wait(_seconds: float) -> None:
        return None

    key = f"{KEY}-retry"
    async with httpx.AsyncClient() as http:
        failing = {"status": 503, "count": 2, "retry_after": 0}
        await http.post(server.url + "/sim/fail", json=failing)
    provider = GoogleProvider(
        api_key=key, base_url=server.url, retry=RetryPolicy(max_retries=3, sleep=no_wait)
    )
    async with provider:
        prefix = Prefix(params=CacheParams(model=MODEL), system=SYSTEM)
        done = await provider.complete(
            Request(prefix=prefix, messages=(user_text("hi"),)), CallContext(session_id="s")
        )
    assert done.retries == 2
    assert done.message.text


async def test_the_tools_and_system_are_cached_through_the_sdk_before_the_first_call(
    served: str,
) -> None:
    """google-genai refuses a cache with an empty `contents` list ("contents are
    required."), so a cache of the tools and system alone sends none."""
    from stoker.cache.planner import CachePolicy
    from stoker.cache.time_policy import TimePolicy

    config = Config.from_env({}, google_api_key=f"{KEY}-head", google_base_url=served)
    guaranteed = CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0))
    async with Agent(
        f"google:{MODEL}", system=SYSTEM, config=config, keep_warm=False, cache_policy=guaranteed
    ) as agent:
        session = agent.session()
        await session.send("Hello")
    made, first = session.records[:2]
    assert made.purpose == "cache_create"
    assert made.usage.written_1h > 1024
    assert first.usage.read == made.usage.written_1h  # the first call read all of it


async def test_a_cache_another_process_deleted_is_dropped_and_the_turn_answered(
    served: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A session names the cache of its tools and system; another process (a startup
    sweep, a user with the SDK) deletes it; the next turn gets the API's 404, forgets the
    cache and sends the whole request instead of failing."""
    from google import genai
    from google.genai import types

    from stoker.cache.planner import CachePolicy
    from stoker.cache.time_policy import TimePolicy

    key = f"{KEY}-gone"
    config = Config.from_env({}, google_api_key=key, google_base_url=served)
    guaranteed = CachePolicy(keep_warm=TimePolicy(implicit_trust=0.0))
    async with Agent(
        f"google:{MODEL}",
        tools=[word_count],
        system=SYSTEM,
        config=config,
        keep_warm=False,
        cache_policy=guaranteed,
    ) as agent:
        session = agent.session()
        await session.send("Hello")
        assert session.records[0].purpose == "cache_create"
        other = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=served))
        (made,) = list(other.caches.list())
        assert made.name is not None
        other.caches.delete(name=made.name)
        result = await session.send("Still there?")
    assert result.text
    assert result.records[0].purpose == "turn"
    assert result.records[0].usage.read > 0  # the implicit entry of the first turn
    assert "is gone; sending without it" in caplog.text
